"""Drives a few minutes of realistic traffic through a running stack, for the dashboards.

    python deploy/grafana/demo_load.py --api http://127.0.0.1:8765 [--minutes 6] [--token T]
        [--watch-dir /tmp/dash-watch] [--cpu-hog-s 40]

What it does, in rounds of ~10 s until the time is up (stdlib only, no extra packages):
- ingests batches of events (varied categories/subcategories, one retry of an already sent id
  per batch so the duplicate counter moves; `--backdate-share` of them with timestamps hours or
  days old, as an import would send: those land directly in the warm/cold tiers, and they make
  "event time → searchable" as long as their age) via POST /memory/ingest;
- recalls with a mix of questions via POST /memory/recall;
- creates and edits files in `--watch-dir` (point the filesystem watcher there:
  `TR_WATCHERS_FILESYSTEM__PATHS='["<dir>"]'`);
- once, after a third of the time, burns one core for `--cpu-hog-s` seconds in a child process
  (the process watcher reports it as system.process/high_cpu);
- once, after two thirds of the time, forces a compaction (POST /memory/compact).

docs/dashboards.md shows how the committed PNGs in docs/img/ were made with it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import time
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

EVENTS: list[tuple[str, str, str]] = [
    ("system.service", "fail", "postgresql.service failed: port 5432 already in use"),
    ("system.service", "restart", "nginx.service restarted after a config reload"),
    ("system.package", "install", "installed ripgrep 14.1 from nixpkgs"),
    ("system.package", "upgrade", "upgraded linux kernel 6.6.30 -> 6.6.32"),
    ("system.config", "rebuild", "nixos-rebuild switch: generation 412 activated"),
    ("system.process", "high_mem", "firefox uses 3.1 GiB RSS"),
    ("system.network", "dns_fail", "DNS resolution of github.com failed on wlp3s0"),
    ("system.storage", "space_warning", "/home is 91% full"),
    ("diagnosis", "root_cause", "the build failed because /tmp was mounted noexec"),
    ("diagnosis", "resolution", "fixed the VPN by lowering the MTU to 1380"),
    ("file", "modify", "edited ~/.config/sway/config: new keybinding for the terminal"),
    ("error", "application", "cargo build: linker cc not found"),
    ("cron", "executed", "backup.timer ran restic: 2.3 GiB, 41 s"),
    ("conversation", "user_request", "the user asked to keep the laptop quiet during meetings"),
    ("user_pattern", "preference", "the user prefers fish over bash and uses helix as editor"),
    ("security", "sudo", "sudo nixos-rebuild by alice"),
]

QUERIES = [
    "why did postgres not start?", "what changed in the nixos config recently?",
    "which packages were installed this week?", "how was the VPN fixed?",
    "is the disk getting full?", "what does the user prefer as editor?",
    "did the backup run?", "what errors happened during the build?",
    "which process used too much memory?", "what happened to nginx?",
]


def _post(api: str, path: str, body: object, token: str | None, timeout: float = 30.0) -> object:
    req = urllib.request.Request(f"{api}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - the operator's URL
        return json.loads(r.read() or b"null")


def _event(rng: random.Random, now: datetime, n: int, backdate_share: float) -> dict[str, object]:
    category, sub, summary = rng.choice(EVENTS)
    age = timedelta(0)
    if rng.random() < backdate_share:
        age = rng.choice([timedelta(hours=rng.uniform(1, 20)), timedelta(days=rng.uniform(2, 30))])
    return {"summary": f"{summary} (#{n})", "category": category, "subcategory": sub,
            "detail": f"demo event {n}", "timestamp": (now - age).isoformat(),
            "metadata": {"severity": rng.choice(["info", "warning", "error"])}}


def _burn(seconds: float) -> None:
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x = (x * 31 + 7) % 1_000_003


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--api", default="http://127.0.0.1:8765")
    ap.add_argument("--token", default=None)
    ap.add_argument("--minutes", type=float, default=6.0)
    ap.add_argument("--batch", type=int, default=12, help="events per ingest round")
    ap.add_argument("--watch-dir", type=Path, default=None)
    ap.add_argument("--cpu-hog-s", type=float, default=40.0)
    ap.add_argument("--backdate-share", type=float, default=0.0,
                    help="fraction of events with an old timestamp (default 0)")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    rng = random.Random(a.seed)
    start = time.monotonic()
    end = start + a.minutes * 60
    hog: multiprocessing.Process | None = None
    compacted = False
    n = ingested = recalls = rounds = 0
    recent_ids: list[str] = []
    while time.monotonic() < end:
        now = datetime.now(UTC)
        batch = []
        for _ in range(a.batch):
            n += 1
            e = _event(rng, now, n, a.backdate_share)
            e["id"] = str(uuid.uuid4())
            batch.append(e)
        if recent_ids:  # a retry of something already sent: counted as a duplicate
            batch.append({**_event(rng, now, n, 0.0), "id": rng.choice(recent_ids)})
        recent_ids = [str(e["id"]) for e in batch][-5:]
        try:
            _post(a.api, "/memory/ingest", batch, a.token)
            ingested += len(batch)
            for _ in range(rng.randint(3, 8)):
                _post(a.api, "/memory/recall", {"query": rng.choice(QUERIES), "maxResults": 6,
                                                "timeframe": "auto"}, a.token)
                recalls += 1
        except OSError as exc:
            print(f"request failed: {exc}")
        if a.watch_dir is not None:
            a.watch_dir.mkdir(parents=True, exist_ok=True)
            rounds += 1
            (a.watch_dir / f"config-{rounds % 8}.conf").write_text(f"setting = {n}\n")
            (a.watch_dir / f"note-{rounds}.txt").write_text(f"round {rounds}\n")
        elapsed = time.monotonic() - start
        if hog is None and elapsed > (end - start) / 3:
            hog = multiprocessing.Process(target=_burn, args=(a.cpu_hog_s,), name="demo-cpu-hog")
            hog.start()
            print(f"cpu hog pid {hog.pid} for {a.cpu_hog_s:.0f}s")
        if not compacted and elapsed > 2 * (end - start) / 3:
            print("compact:", json.dumps(_post(a.api, "/memory/compact", {}, a.token, timeout=120))[:300])
            compacted = True
        print(f"{elapsed:5.0f}s ingested {ingested} recalls {recalls}", flush=True)
        time.sleep(max(0.0, 10 - (time.monotonic() - start - elapsed)))
    if hog is not None:
        hog.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
