"""The row's probes: a Postgres backend that ends between listing and measuring is left out of
its service's sample, not the whole sample lost."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from .load_client import _per_service


def test_a_child_gone_mid_sample_is_skipped_not_the_service() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        def measure(proc: psutil.Process) -> float:
            if proc.pid == child.pid:
                raise psutil.NoSuchProcess(proc.pid)  # ended after the listing
            # This process counts; other children of the test run (servers of other tests)
            # weigh nothing here.
            return 7.0 if proc.pid == os.getpid() else 0.0

        assert _per_service({"postgres": os.getpid()}, measure) == {"postgres": 7.0}
        assert _per_service({"postgres": 2**22 + 7}, measure) == {"postgres": 0.0}  # gone
    finally:
        child.kill()
        child.wait()


def test_private_memory_counts_a_heap_that_grows_not_a_file_mapped() -> None:
    import mmap
    import tempfile

    from .load_client import memory_mb

    def anonymous_mb(proc: psutil.Process) -> float:
        return memory_mb(proc)[1]

    me = psutil.Process()
    before = anonymous_mb(me)
    heap = bytearray(64 * 2**20)  # touched: 64 MB of private anonymous pages
    grown = anonymous_mb(me)
    with tempfile.TemporaryFile() as fh:
        fh.truncate(64 * 2**20)
        mapped = mmap.mmap(fh.fileno(), 64 * 2**20, access=mmap.ACCESS_READ)
        sum(mapped[i] for i in range(0, len(mapped), 4096))  # every page read in
        with_file = anonymous_mb(me)
        mapped.close()
    del heap
    assert grown - before > 60
    assert abs(with_file - grown) < 8  # the file's pages are not private memory
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    gone = psutil.Process(child.pid)
    child.wait()
    with pytest.raises(psutil.NoSuchProcess):
        anonymous_mb(gone)


def test_memory_growth_is_read_on_the_floor_not_on_build_peaks() -> None:
    from .test_sustained_load import _memory_grows

    flat = [200.0] * 30
    peaks = list(flat)
    peaks[25] = peaks[28] = 450.0  # samples that fell inside HNSW builds
    assert not _memory_grows(flat)
    assert not _memory_grows(peaks)
    leak = [200.0 + 6 * i for i in range(30)]  # the floor rises 6 MB a sample
    assert _memory_grows(leak)


async def test_the_pool_reads_a_server_timing_header() -> None:
    import asyncio

    from .load_client import Pool

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        await reader.readexactly(2)  # the body, {}
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                     b"Server-Timing: queue;dur=0.1, bm25;dur=12.5, process_ends;dur=3\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = Pool(f"http://127.0.0.1:{port}", {}, size=1)
    try:
        assert await pool.post_timed("/x", {}) == (
            200, {"queue": 0.1, "bm25": 12.5, "process_ends": 3.0})
    finally:
        await pool.close()
        server.close()


def test_where_the_slow_recalls_time_went() -> None:
    from .test_sustained_load import _where_time_went

    ms = [20.0, 30.0, 250.0]
    stages = [{"queue": 0.1, "bm25": 5.0, "total": 15.0}, {},  # an answer without the header
              {"queue": 20.0, "bm25": 150.0, "total": 200.0}]
    went = _where_time_went(ms, stages, budget=100.0)
    assert went["over the budget"] == {"recalls": 1.0, "latency": 250.0, "bm25": 150.0,
                                       "queue": 20.0, "total": 200.0, "outside": 30.0}
    assert went["all"]["recalls"] == 2.0 and went["all"]["bm25"] == 77.5
    assert _where_time_went([], [], 100.0) == {"all": {}, "over the budget": {}}
