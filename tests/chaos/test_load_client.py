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
