"""Row: the state disk full (a size-limited tmpfs as `TOTALRECALL_HOME`).

Everything the stack keeps lives on that tmpfs (nats/ JetStream store, pg/ Postgres data, zvec/,
memory/ Markdown, spool/, logs/): it is the machine's state disk filling up, not one store.
Only the test harness's copy of the supervisor's output is kept off it (a symlink), so the
harness can still read which pid each service has.

Events stream in; once some are stored, a filler file takes every free byte; the stream goes on
(a client retries refused batches with the same ids) for a while, then the filler is deleted.
What must hold: refusals name the reason (a 5xx with a detail, never a hang or a bare 500), the
services' health says so; afterwards nothing accepted is lost or doubled, the Zvec tiers open,
every daily Markdown file parses without a torn tail, and the pipeline flows again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from full_disk import fill, needs_root, tmpfs
from waiting import wait_for_sync

from .report import REPO, record, slug
from .stack import SERVICES, ChaosStack, chaos_stack_in, lost_and_twice, slash
from .streaming import NAMESPACE, Streamer

ROW = "the state disk full (a size-limited tmpfs as `TOTALRECALL_HOME`)"
TMPFS_SIZE = "384m"
ENOSPC_WORDS = ("no space left", "enospc", "disk full", "insufficient", "storage")


@contextlib.contextmanager
def tmpfs_keeping_logs(path: Path, size: str, keep_logs_in: Path) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `path`; its logs/ are copied to `keep_logs_in` before it is
    unmounted (for a look after a failure)."""
    with tmpfs(path, size):
        try:
            yield path
        finally:
            with contextlib.suppress(OSError):
                shutil.copytree(path / "logs", keep_logs_in / "logs", dirs_exist_ok=True)


def _health_while_full(stack: ChaosStack) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in SERVICES:
        h = stack.health(name)
        out[name] = "no answer" if h is None else f"{h[0]} {h[1].get('status', '')}"
    return out


def _mentions_enospc(home: Path) -> dict[str, int]:
    """Log lines naming the lack of space, per log file (read once space is back)."""
    found: Counter[str] = Counter()
    for log in sorted((home / "logs").glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if any(w in line.lower() for w in ENOSPC_WORDS):
                found[log.stem] += 1
    return dict(found)


def _torn_daily_files(home: Path) -> list[str]:
    from totalrecall_indexer.core.torn_tail import find_torn_tail
    from totalrecall_schema.daily_log import file_header, parse_daily

    torn = []
    for path in sorted((home / "memory" / "daily").glob("*.md")):
        text = path.read_text()
        parse_daily(text)  # raises on a file it cannot read
        if find_torn_tail(text, file_header(date.fromisoformat(path.stem))) is not None:
            torn.append(path.name)
    return torn


def run_row(base: Path, model_path: Path, events: int, rate: float, full_s: float) -> None:
    run = uuid.uuid4().hex[:6]
    outside = base / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    with tmpfs_keeping_logs(base / "home", TMPFS_SIZE, outside) as home:
        (home / "supervisor.log").symlink_to(outside / "supervisor.log")
        filler = home / "filler.bin"
        with chaos_stack_in(home, model_path) as stack:
            used_at_start = _used_mb(home)
            streamer = Streamer(stack.api, total=events, rate=rate, run=run, batch=20).start()
            wait_for_sync(lambda: len(stack.pg_id_counts(NAMESPACE)) >= events // 5, 300,
                          what="a fifth of the stream stored", interval=0.25)
            filled_mb = fill(filler) / 2**20
            t_full = time.monotonic()
            accepted_before = len(streamer.accepted)
            health: dict[str, str] = {}
            tick = threading.Event()
            while time.monotonic() - t_full < full_s:  # the disk stays full this long
                health = _health_while_full(stack)
                tick.wait(1.0)
            accepted_while_full = len(streamer.accepted) - accepted_before
            refusals = list(streamer.refusals)
            failures = dict(streamer.failures)
            filler.unlink()
            t_free = time.monotonic()
            streamer.join(timeout=events / rate + 900)
            accepted = list(streamer.accepted)

            def all_in() -> bool:
                return (stack.drained()
                        and len(stack.pg_id_counts(NAMESPACE)) >= len(set(accepted)))
            wait_for_sync(all_in, 900,
                          what="the pipeline to catch up once space is back", interval=1)
            recovered_s = time.monotonic() - t_free
            pg = stack.pg_id_counts(NAMESPACE)
            healthy_after = _health_while_full(stack)
        lost, twice = lost_and_twice(home, NAMESPACE, accepted, pg)  # opens every Zvec tier
        torn = _torn_daily_files(home)
        enospc_logged = _mentions_enospc(home)
    unclear = [r for r in refusals if r.startswith("500") or '"detail"' not in r]
    health_named_it = "degraded" in health.get("recall-api", "")
    holds = (not any(lost.values()) and not any(twice.values()) and not torn and not unclear
             and health_named_it and all(v.startswith("200") for v in healthy_after.values()))
    figures: dict[str, Any] = {
        "tmpfs": TMPFS_SIZE, "used at start MB": used_at_start,
        "filler MB": round(filled_mb), "full for s": full_s,
        "accepted while full": accepted_while_full,
        "refused while full": ", ".join(f"{k}×{v}" for k, v in failures.items()) or "none",
        "health while full": ", ".join(f"{k} {v}" for k, v in health.items()),
        "log lines naming it": ", ".join(f"{k} {v}" for k, v in enospc_logged.items()) or "none",
        "caught up after space back s": round(recovered_s, 1),
        "lost (pg/zvec/md)": slash(lost), "twice (pg/zvec/md)": slash(twice),
        "torn Markdown files": len(torn),
    }
    record(ROW, holds, figures, note="refusals: " + " | ".join(r[:140] for r in refusals[:3]))
    kept = None if holds else keep_failure(outside, figures, {
        "lost": lost, "twice": twice, "torn": torn, "unclear": unclear,
        "health while full": health, "health after": healthy_after})
    where = f" (logs and counts kept in {kept})" if kept else ""
    assert not unclear, f"refusals without a reason: {unclear[:3]}{where}"
    assert not torn, f"torn daily files: {torn}{where}"
    assert health_named_it, f"recall-api health did not say degraded while full: {health}{where}"
    assert not any(lost.values()), f"lost: {lost}{where}"
    assert not any(twice.values()), f"stored twice: {twice}{where}"
    assert all(v.startswith("200") for v in healthy_after.values()), f"{healthy_after}{where}"


def keep_failure(outside: Path, figures: dict[str, Any], counts: dict[str, Any]) -> Path:
    """Copy a failing run's supervisor log and service logs, with its counts, where pytest's
    clean-up of old temporary folders does not reach (`$TR_CHAOS_KEEP_DIR`, else
    `.state/chaos-failures/` in the repository)."""
    root = Path(os.environ.get("TR_CHAOS_KEEP_DIR") or REPO / ".state" / "chaos-failures")
    dest = root / f"{slug(ROW)[:30]}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    dest.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        shutil.copytree(outside, dest, dirs_exist_ok=True, symlinks=False)
    (dest / "counts.json").write_text(json.dumps({"figures": figures, **counts}, indent=2,
                                                 default=str) + "\n")
    return dest


def _used_mb(path: Path) -> int:
    st = os.statvfs(path)
    return round((st.f_blocks - st.f_bfree) * st.f_frsize / 2**20)


@needs_root
@pytest.mark.fast
@pytest.mark.timeout(600)  # a loaded 2-core machine drains slowly
def test_disk_full_briefly(tmp_path: Path, model_path: Path) -> None:
    run_row(tmp_path, model_path, events=600, rate=30, full_s=10)


@needs_root
@pytest.mark.chaos
@pytest.mark.timeout(3600)
def test_disk_full_for_a_minute(tmp_path: Path, model_path: Path) -> None:
    run_row(tmp_path, model_path, events=4000, rate=40, full_s=60)
