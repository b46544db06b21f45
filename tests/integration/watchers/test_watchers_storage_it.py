"""Real bytes and inodes fill a filesystem past its thresholds → `system.storage` events arrive.

A small tmpfs (needs root / CAP_SYS_ADMIN; skipped otherwise) crosses the default 90 % for space
and inodes for real; on any machine, a per-path threshold just above the current usage of the
disk holding the test's temp dir is crossed by writing 128 MiB there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from totalrecall_schema import MemoryEvent, Severity, Topology
from totalrecall_watchers.settings import StorageThresholds
from watchers_it_helpers import StreamReader, make_settings, running, wait_until

MiB = 1024 * 1024


@contextlib.contextmanager
def small_tmpfs(path: Path, size_mib: int, inodes: int) -> Iterator[Path]:
    path.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,nr_inodes={inodes}",
                        "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def write_bytes(path: Path, n: int) -> None:
    chunk = os.urandom(MiB)
    with path.open("wb") as f:
        for _ in range(n // MiB):
            f.write(chunk)
        f.write(chunk[: n % MiB])
        f.flush()
        os.fsync(f.fileno())


def storage(path: Path, sub: str, pred=lambda e: True):  # noqa: ANN001, ANN202
    return lambda e: (e.category == "system.storage" and e.subcategory == sub
                      and e.metadata.path == str(path) and pred(e))


async def test_small_tmpfs_filled_past_space_and_inode_thresholds(
        nats_url: str, topology: Topology, tr_home: Path, tmp_path: Path,
        reader: StreamReader) -> None:
    with small_tmpfs(tmp_path / "small", size_mib=8, inodes=64) as mnt:
        settings = make_settings(nats_url, topology, tr_home, enable=("storage",))
        settings.storage.interval_s = 0.2
        settings.storage.include_partitions = False
        settings.storage.paths = [str(mnt)]
        async with running(settings) as app:
            runner = app.state.runner
            await wait_until(lambda: runner.status["storage"].last_poll_at is not None, 10,
                             "first storage poll")
            assert runner.status["storage"].events == 0  # an empty filesystem is not news

            big = mnt / "big.bin"
            write_bytes(big, int(7.5 * MiB))  # 93.75 % of 8 MiB
            ev, _ = await reader.wait_for(storage(mnt, "space_warning"), 10, "space warning")
            assert ev.severity == Severity.WARNING
            assert ev.summary.startswith(f"{mnt} at 9") and "capacity" in ev.summary
            extra = ev.metadata.model_extra or {}
            assert 90 <= extra["percent"] < 95 and extra["threshold_percent"] == 90
            assert extra["free_bytes"] <= MiB
            with big.open("ab") as f:  # 7.9 of 8 MiB: critical
                f.write(os.urandom(MiB * 4 // 10))
            ev, _ = await reader.wait_for(
                storage(mnt, "space_warning", lambda e: e.severity == Severity.CRITICAL), 10,
                "critical space")
            assert ev.metadata.model_extra["level"] == "critical"
            big.unlink()
            await reader.wait_for(storage(mnt, "space_warning", lambda e: "back to" in e.summary),
                                  10, "space recovered")

            for i in range(58):  # + the root directory: 59 of 64 inodes (92 %)
                (mnt / f"f{i}").touch()
            ev, _ = await reader.wait_for(storage(mnt, "inode_warning"), 10, "inode warning")
            assert "inodes at 92%" in ev.summary and ev.severity == Severity.WARNING
        events: list[MemoryEvent] = await reader.events()
        assert [(e.subcategory, e.severity) for e in events] == [
            ("space_warning", Severity.WARNING), ("space_warning", Severity.CRITICAL),
            ("space_warning", Severity.INFO), ("inode_warning", Severity.WARNING)]


async def test_per_path_threshold_crossed_by_writing_to_the_real_disk(
        nats_url: str, topology: Topology, tr_home: Path, tmp_path: Path,
        reader: StreamReader) -> None:
    size = 128 * MiB
    du = psutil.disk_usage(str(tmp_path))
    if du.free < 4 * size:
        pytest.skip("not enough free space for the test file")
    capacity = du.used + du.free
    now_pct = 100.0 * du.used / capacity
    warn = now_pct + 100.0 * (size / 2) / capacity  # half the file crosses it
    settings = make_settings(nats_url, topology, tr_home, enable=("storage",))
    settings.storage.interval_s = 0.2
    settings.storage.include_partitions = False
    settings.storage.paths = [str(tmp_path)]
    settings.storage.thresholds = {str(tmp_path): StorageThresholds(
        warn_percent=warn, critical_percent=min(100.0, warn + 10))}
    async with running(settings) as app:
        runner = app.state.runner
        await wait_until(lambda: runner.status["storage"].last_poll_at is not None, 10,
                         "first storage poll")
        if runner.status["storage"].events:
            pytest.skip("the disk grew by more than 64 MiB under the test (other writers)")
        write_bytes(tmp_path / "ballast.bin", size)
        try:
            ev, _ = await reader.wait_for(storage(tmp_path, "space_warning"), 10,
                                          "space warning of the per-path threshold")
        finally:
            (tmp_path / "ballast.bin").unlink()
        extra = ev.metadata.model_extra or {}
        assert extra["threshold_percent"] == pytest.approx(warn)
        assert extra["percent"] >= warn and ev.severity == Severity.WARNING
