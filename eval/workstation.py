"""A workstation scenario set: real events made on this machine, then questions an OS agent gets.

Every event is made for real and reaches the stack only through a watcher (nothing is POSTed to
`/memory/ingest`). This machine is a container (no systemd, no sshd, no apt database that a
watcher follows), so where a watcher cannot see the real source the nearest real channel it does
read is used:

* CPU hogs — real `python -c` busy loops; the *process* watcher reports `high_cpu`, the
  *procexit*/process watcher reports their end. One hog exits by itself (its deadline passes),
  one keeps running until the scenario set is done: "what is using my CPU now?" must name it.
* A unit that fails and recovers — a real process appends systemd-format lines
  (`systemd[1]: backup-X.service: Failed at step EXEC …`, `Main process exited, code=…`,
  `Failed with result 'exit-code'`, later `Started …`) to an application log the *journal*
  watcher tails (adapters/log_tail.py): the cause line and the failure carry the same unit. (A text
  log has no priority field: the watcher guesses it from words, so `Main process exited` and
  `Started` are info and skipped; the recovery is therefore not recorded.)
* A config edited before a service broke — a real file under a watched directory is created,
  then rewritten (*filesystem* watcher), then the service's failure lines are logged as above.
* A disk path filling — a real 8 MiB file written under the watched directory (*filesystem*).
* A package installed — a real `pip install --no-index --target <watched>/site-X` of a tiny
  local package built here; the *filesystem* watcher sees its files appear.
* An SSH login failure burst — a real process appends sshd-format lines
  (`sshd[pid]: Failed password for invalid user U from IP port P ssh2`) to the tailed log.
* Near-duplicates — two real CPU-hog bursts of the same program, and two disk-full error lines
  differing only in numbers: the newest should come first.

More kinds (memory pressure, who changed a file, reclaimable space, security, what a
conversation concluded) are in `workstation_kinds.py`, each asked its scenario many ways.

Gold answers are predicates on the recalled memories (ids are made by the watchers).
Scored per question kind: Hit@1, Hit@5, MRR over the first 10 memories.
"""

from __future__ import annotations

import json
import os
import random
import signal
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import metrics as M
from . import workstation_containers as containers
from . import workstation_kinds as kinds
from .client import RecallClient

Memory = dict[str, Any]
Pred = Callable[[Memory], bool]
NAMESPACE = "default"  # where the watchers write


def _text(m: Memory) -> str:
    return f"{m.get('summary', '')}\n{m.get('detail', '')}"


def has(*needles: str, sub: str | None = None) -> Pred:
    """Gold: every needle in the memory's text (and the subcategory, when given)."""
    def pred(m: Memory) -> bool:
        return (sub is None or m.get("subcategory") == sub) and all(n in _text(m) for n in needles)
    return pred


def lacks(pred: Pred) -> Pred:
    return lambda m: not pred(m)


@dataclass
class Question:
    kind: str
    question: str
    gold: Pred
    #: memories that must NOT rank above the gold (e.g. the exited hog for a "now" question)
    stale: Pred | None = None
    qid: str = ""
    #: "dev" or "held-out" (`workstation_kinds.split_of`); the older kinds are all dev
    split: str = "dev"


@dataclass
class Paths:
    """What the stack's watchers watch: a directory (filesystem) and a log file (journal)."""
    watched_dir: Path
    app_log: Path
    env: dict[str, str] | None = None

    def stack_env(self) -> dict[str, str]:
        """The watcher settings a stack needs for these scenarios (see tests/e2e/stacklib.py)."""
        if self.env is None:  # once: the pressure threshold is what the stack was given
            self.env = self._stack_env()
        return dict(self.env)

    def _stack_env(self) -> dict[str, str]:
        return {**kinds.stack_env(self.watched_dir.parent),
                "TR_WATCHERS_FILESYSTEM__PATHS": json.dumps([str(self.watched_dir)]),
                "TR_WATCHERS_FILESYSTEM__DEBOUNCE_MS": "100",
                "TR_WATCHERS_JOURNAL__LOG_FILES": json.dumps([str(self.app_log)]),
                "TR_WATCHERS_PROCESS__INTERVAL_S": "1",
                # What a CPU hog gets: 40% of a core, less on a machine shared with other work
                # (a busy-loop got 16% of a core under a shared CPU quota at load 12):
                # `TR_EVAL_HOG_CPU_PERCENT` lowers it (other busy processes are then seen too).
                "TR_WATCHERS_PROCESS__CPU_PERCENT": os.environ.get("TR_EVAL_HOG_CPU_PERCENT",
                                                                   "40"),
                "TR_WATCHERS_RATE_LIMIT__PER_WATCHER_BURST": "1000",
                "TR_WATCHERS_RATE_LIMIT__GLOBAL_BURST": "1000"}

    @classmethod
    def make(cls, root: Path) -> Paths:
        (root / "watched").mkdir(parents=True, exist_ok=True)
        (root / "logs").mkdir(parents=True, exist_ok=True)
        (root / "machine").mkdir(parents=True, exist_ok=True)  # what the reclaimable one measures
        # Watchers give up on a source missing at their start: the logs exist before the stack.
        (root / "logs" / "app.log").touch()
        (root / "logs" / "auth.log").touch()
        return cls(root / "watched", root / "logs" / "app.log")


#: The names and addresses a run makes up (`make_events` seeds it from the run's tag: a run in
#: a stack of its own, tag `ev`, makes the same ones every time, so that two runs differ only
#: by the code they run; a run against a shared store has a fresh tag and fresh names).
RNG = random.Random()


def marker(k: int = 8) -> str:
    """Letters only: numbers are what near-duplicate folding ignores."""
    return "".join(RNG.choices(string.ascii_lowercase, k=k))


def log_lines(app_log: Path, lines: Sequence[str]) -> None:
    """A real process appends the lines (as a daemon's syslog output would)."""
    code = ("import sys\nwith open(sys.argv[1], 'a') as f:\n"
            "    for ln in sys.argv[2:]:\n        f.write(ln + '\\n'); f.flush()\n")
    subprocess.run([sys.executable, "-c", code, str(app_log), *lines], check=True, timeout=30)


def syslog(ident: str, pid: int, msg: str) -> str:
    """A line as rsyslog writes it (`Nov  5 08:09:10 host ident[pid]: msg`)."""
    now = datetime.now()
    return f"{now:%b} {now.day:>2} {now:%H:%M:%S} ws {ident}[{pid}]: {msg}"


@dataclass
class World:
    """The events made, with the markers the questions use."""
    m: dict[str, str] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    ips: list[str] = field(default_factory=list)
    probes: list[tuple[str, Pred]] = field(default_factory=list)  # (query, predicate) to wait on
    running: list[subprocess.Popen[bytes]] = field(default_factory=list)
    #: The scenarios of `workstation_kinds.py`.
    more: kinds.KindWorld = field(default_factory=kinds.KindWorld)

    def stop(self) -> None:
        for p in self.running:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        self.more.stop()


def wait_recallable(client: RecallClient, query: str, pred: Pred, timeout: float) -> Memory:
    deadline = time.monotonic() + timeout
    while True:
        mems, _, _ = client.recall(query, NAMESPACE, max_results=10)
        hit = next((m for m in mems if pred(m)), None)
        if hit is not None:
            return hit
        if time.monotonic() > deadline:
            raise TimeoutError(f"not recallable after {timeout:.0f}s: {query!r}")
        time.sleep(1.0)


def _hog(tag: str, seconds: float | None) -> subprocess.Popen[bytes]:
    body = ("import time\nend = time.time() + float(__import__('sys').argv[1])\n"
            "while time.time() < end: pass\n") if seconds else "while True: pass\n"
    args = [sys.executable, "-c", f"# {tag}\n{body}"]
    if seconds:
        args.append(str(seconds))
    return subprocess.Popen(args)


def make_events(client: RecallClient, paths: Paths, *, log: Callable[[str], None] = print,
                timeout: float = 90.0, seed: str | None = None) -> World:
    """Make every scenario's events for real, wait until each is recallable. Should a step
    fail, the processes started before it are stopped (a CPU hog left running slowed every
    test after it). `seed`: the made-up names and addresses (`RNG`) follow from it."""
    if seed is not None:
        RNG.seed(seed)
    w = World()
    for k in ("hogold", "hognow", "unit", "cfgsvc", "cfg", "disk", "pkg", "ssh", "dup"):
        w.m[k] = marker()
    try:
        return _make_events(client, paths, w, log, timeout)
    except BaseException:
        w.stop()
        raise


def _make_events(client: RecallClient, paths: Paths, w: World, log: Callable[[str], None],
                 timeout: float) -> World:
    # 1. a CPU hog that exits by itself, then one that keeps running
    old = _hog(f"render-{w.m['hogold']}", 6.0)
    w.pids["hogold"] = old.pid
    wait_recallable(client, f"process {old.pid} {w.m['hogold']} using CPU",
                    has(f"PID {old.pid})", w.m["hogold"], sub="high_cpu"), timeout)
    old.wait(60)
    ended = lambda m: f"PID {old.pid})" in m.get("summary", "") and \
        m.get("subcategory") in ("exit", "crash")  # noqa: E731
    wait_recallable(client, f"process {old.pid} {w.m['hogold']} exited", ended, timeout)
    log("[workstation] exited CPU hog recorded")
    now = _hog(f"encode-{w.m['hognow']}", None)
    w.running.append(now)
    w.pids["hognow"] = now.pid
    wait_recallable(client, f"process {now.pid} {w.m['hognow']} using CPU",
                    has(f"PID {now.pid})", w.m["hognow"], sub="high_cpu"), timeout)
    log("[workstation] running CPU hog recorded")

    # 2. a unit fails (its cause first, same unit), then recovers
    unit = f"backup-{w.m['unit']}.service"
    log_lines(paths.app_log, [
        syslog("systemd", 1, f"{unit}: Failed at step EXEC spawning /usr/local/bin/backup-"
                             f"{w.m['unit']}: Permission denied"),
        syslog("systemd", 1, f"{unit}: Main process exited, code=exited, status=203/EXEC"),
        syslog("systemd", 1, f"{unit}: Failed with result 'exit-code'."),
    ])
    wait_recallable(client, f"{unit} failed", has(unit, sub="fail"), timeout)
    wait_recallable(client, f"{unit} permission denied", has(unit, "Permission denied"), timeout)
    log_lines(paths.app_log, [syslog("systemd", 1, f"Started {unit}.")])
    log("[workstation] unit failure recorded")

    # 3. a config edited, then its service breaks
    conf = paths.watched_dir / f"{w.m['cfgsvc']}.conf"
    conf.write_text("listen = 127.0.0.1:8080\nworkers = 4\n")
    wait_recallable(client, f"created {conf.name}", has(str(conf), sub="create"), timeout)
    conf.write_text("listen = 127.0.0.1:8080\nworkers = 4\ntls_cert = /etc/missing.pem\n")
    wait_recallable(client, f"modified {conf.name}", has(str(conf), sub="modify"), timeout)
    cunit = f"{w.m['cfgsvc']}.service"
    log_lines(paths.app_log, [
        syslog("systemd", 1, f"{cunit}: Main process exited, code=exited, status=1/FAILURE"),
        syslog("systemd", 1, f"{cunit}: Failed with result 'exit-code'.")])
    wait_recallable(client, f"{cunit} failed", has(cunit, sub="fail"), timeout)
    log("[workstation] config edit + failure recorded")

    # 4. a disk path filling
    big = paths.watched_dir / f"dump-{w.m['disk']}.bin"
    with open(big, "wb") as f:
        f.write(os.urandom(8 * 1024 * 1024))
    wait_recallable(client, f"large file dump-{w.m['disk']}.bin written", has(str(big)), timeout)
    log("[workstation] disk filler recorded")

    # 5. a package installed with pip (a real local package, into a watched target dir)
    pkg = f"tinypkg_{w.m['pkg']}"
    with tempfile.TemporaryDirectory() as src:
        (Path(src) / pkg).mkdir()
        (Path(src) / pkg / "__init__.py").write_text("VERSION = '1.0'\n")
        (Path(src) / "pyproject.toml").write_text(
            f'[project]\nname = "{pkg}"\nversion = "1.0"\n'
            '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
        target = paths.watched_dir / f"site-{w.m['pkg']}"
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--no-build-isolation", "--target", str(target), src],
                       check=True, timeout=180)
    wait_recallable(client, f"installed {pkg}", has(pkg), timeout)
    log("[workstation] pip install recorded")

    # 6. an SSH login failure burst (distinct users and addresses)
    users = [f"{u}{w.m['ssh']}" for u in ("admin", "oracle", "git", "test")]
    w.ips = [f"203.0.113.{RNG.randint(10, 250)}", f"198.51.100.{RNG.randint(10, 250)}",
             f"192.0.2.{RNG.randint(10, 250)}", f"203.0.113.{RNG.randint(10, 250)}"]
    w.ips = list(dict.fromkeys(w.ips))
    lines = [syslog("sshd", 4000 + i, f"Failed password for invalid user {users[i % len(users)]} "
                                      f"from {ip} port {40000 + i} ssh2")
             for i, ip in enumerate(w.ips)]
    # the same user from another address: only the address differs
    w.ips.append(f"198.51.100.{RNG.choice([x for x in range(10, 250)])}")
    lines.append(syslog("sshd", 4100, f"Failed password for invalid user {users[0]} from "
                                      f"{w.ips[-1]} port 51515 ssh2"))
    log_lines(paths.app_log, lines)
    wait_recallable(client, f"failed password {users[0]}", has(users[0]), timeout)
    log("[workstation] ssh burst recorded")

    # 7. near-duplicates: the same error twice, numbers differ; the newest should win
    d = w.m["dup"]
    log_lines(paths.app_log, [syslog(f"archiver-{d}", 5001,
                                     f"ERROR no space left on /srv/archive-{d}: 91% used")])
    wait_recallable(client, f"archiver-{d} no space", has(f"archiver-{d}", "91%"), timeout)
    log_lines(paths.app_log, [syslog(f"archiver-{d}", 5002,
                                     f"ERROR no space left on /srv/archive-{d}: 99% used")])
    try:
        wait_recallable(client, f"archiver-{d} no space 99%", has(f"archiver-{d}", "99%"), timeout)
    except TimeoutError:
        log("[workstation] the second near-duplicate never became its own memory (folded)")

    # 8-12. memory pressure, who changed a file, reclaimable space, security, conclusions
    # (`workstation_kinds.py`): only on a stack started with this set's settings
    # (`Paths.stack_env`), whose pressure threshold, auth log and measured root they need.
    if paths.env is None:
        w.more.skipped["more kinds"] = "the stack was not started with Paths.stack_env()"
        log("[workstation] pressure, who-changed, reclaimable, security and concluded left out: "
            "the stack was not started with this set's settings")
        return w
    threshold = float(paths.env["TR_WATCHERS_PRESSURE__MEMORY_PERCENT"])
    kinds.make_pressure(client, w.more, threshold, marker(), log, timeout)
    kinds.make_writers(client, w.more, paths.watched_dir, marker(), log, timeout)
    kinds.make_reclaimable(client, w.more, paths.watched_dir.parent / "machine", marker(), log,
                           timeout)
    kinds.make_security(client, w.more, paths.app_log.parent / "auth.log", marker(), log,
                        timeout)
    kinds.make_conversations(client, w.more, marker(), log, timeout)
    containers.make_containers(lambda q, gold, t: wait_recallable(client, q, gold, t),
                               w.more.values, w.more.skipped, w.more.closers, marker(), log,
                               timeout)
    return w


def questions(w: World) -> list[Question]:
    m, p = w.m, w.pids
    unit = f"backup-{m['unit']}.service"
    cunit = f"{m['cfgsvc']}.service"
    conf = f"{m['cfgsvc']}.conf"
    # The running hog's own event, or a later one that names it as the top CPU user of that
    # moment (the pressure watcher's snapshot): either answers "what is using my CPU now?".
    names_hog = has(f"PID {p['hognow']})", sub="high_cpu")
    def hog_now(x: Memory) -> bool:
        top = (x.get("metadata") or {}).get("top_cpu") or {}
        return names_hog(x) or (x.get("category") == "system.pressure"
                                and top.get("pid") == p["hognow"])
    hog_old = has(f"PID {p['hogold']})", sub="high_cpu")
    cause = has(unit, "Permission denied")
    fail = has(unit, sub="fail")
    cfg_edit = has(conf, sub="modify")
    dup_new, dup_old = has(f"archiver-{m['dup']}", "99%"), has(f"archiver-{m['dup']}", "91%")
    qs = [
        # now-state: the running hog, not the exited one
        Question("now-state", "what's using my CPU right now?", hog_now, stale=hog_old),
        Question("now-state", "which process is hogging the CPU at the moment?", hog_now,
                 stale=hog_old),
        Question("now-state", "why is the machine slow now? high CPU", hog_now, stale=hog_old),
        Question("now-state", f"is encode-{m['hognow']} still burning CPU?", hog_now),
        Question("now-state", "what is currently running hot on the CPU", hog_now, stale=hog_old),
        # what happened to a process (identifier: PID / marker)
        Question("process-history", f"what happened to process {p['hogold']}?",
                 lambda x: f"PID {p['hogold']})" in x.get("summary", "")),
        Question("process-history", f"did render-{m['hogold']} exit?",
                 lambda x: f"PID {p['hogold']})" in x.get("summary", "")
                 and x.get("subcategory") in ("exit", "crash")),
        Question("process-history", f"which process used a lot of CPU earlier (render-{m['hogold']})",
                 hog_old),
        # why-failed: the failure, and its cause with it
        Question("why-failed", f"why did {unit} fail?", cause),
        Question("why-failed", f"why did backup-{m['unit']} fail yesterday?", cause),
        Question("why-failed", f"what error did backup-{m['unit']} hit?", cause),
        Question("why-failed", f"{unit} failed", fail),
        Question("why-failed", f"did backup-{m['unit']} crash?", fail),
        Question("why-failed", f"why is {cunit} down?", has(cunit, sub="fail")),
        # what-changed-before
        Question("changed-before", f"what changed before {cunit} broke?", cfg_edit),
        Question("changed-before", f"which config file was edited before {m['cfgsvc']} failed?",
                 cfg_edit),
        Question("changed-before", f"what was modified in {m['cfgsvc']}'s configuration?",
                 cfg_edit),
        Question("changed-before", f"was {conf} created recently?", has(conf, sub="create")),
        # disk
        Question("disk", f"what is filling the disk: dump-{m['disk']}.bin?",
                 has(f"dump-{m['disk']}.bin")),
        Question("disk", "which big file was written to the watched directory?",
                 has(f"dump-{m['disk']}.bin")),
        Question("disk", f"why is /srv/archive-{m['dup']} full?", dup_new, stale=dup_old),
        Question("disk", f"how full is archive-{m['dup']} now?", dup_new, stale=dup_old),
        Question("disk", f"archiver-{m['dup']} no space left", dup_new, stale=dup_old),
        # package installed
        Question("package", f"was tinypkg_{m['pkg']} installed?", has(f"tinypkg_{m['pkg']}")),
        Question("package", f"which python package was installed into site-{m['pkg']}?",
                 has(f"tinypkg_{m['pkg']}")),
        Question("package", f"when did pip install tinypkg_{m['pkg']}", has(f"tinypkg_{m['pkg']}")),
        # identifier lookup: ssh failures
        Question("identifier", f"which IPs failed to log in as admin{m['ssh']}?",
                 has(f"admin{m['ssh']}", "Failed password")),
        Question("identifier", f"failed ssh logins for oracle{m['ssh']}", has(f"oracle{m['ssh']}")),
        Question("identifier", f"who tried user git{m['ssh']} over ssh?", has(f"git{m['ssh']}")),
    ]
    for ip in w.ips:
        qs.append(Question("identifier", f"what did {ip} do?", has(ip)))
    qs.append(Question("identifier", f"failed logins from {w.ips[-1]}", has(w.ips[-1])))
    qs += kinds.questions(w.more, lambda kind, text, gold, stale=None, split="dev": Question(
        kind, text, gold, stale=stale, split=split))
    for i, q in enumerate(qs):
        q.qid = f"ws-{i:03d}"
    return qs


def score(q: Question, mems: Sequence[Memory]) -> dict[str, float]:
    rank = next((i + 1 for i, x in enumerate(mems) if q.gold(x)), None)
    stale_rank = next((i + 1 for i, x in enumerate(mems) if q.stale and q.stale(x)), None)
    out = {"Hit@1": float(rank == 1), "Hit@5": float(rank is not None and rank <= 5),
           "MRR": 1.0 / rank if rank else 0.0}
    if q.stale is not None:
        out["fresh_first"] = float(rank is not None and (stale_rank is None or rank < stale_rank))
    return out


def ask(client: RecallClient, qs: Sequence[Question], max_results: int = 10
        ) -> list[dict[str, Any]]:
    rows = []
    for q in qs:
        mems, ms, body = client.recall(q.question, NAMESPACE, max_results=max_results)
        rows.append({"qid": q.qid, "category": q.kind, "split": q.split, "question": q.question,
                     "ranked": [x.get("summary", "")[:160] for x in mems],
                     "latency_ms": round(ms, 2), "query_class": body.get("query_class"),
                     "scores": score(q, mems)})
    return rows


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per kind, then each kind's dev and held-out halves (where it has held-out questions)."""
    kinds = sorted({r["category"] for r in rows})
    held = sorted({r["category"] for r in rows if r.get("split") == "held-out"})
    halves = ("dev", "held-out")
    # (name, the kind or None for every kind, the half or None for both)
    sets: list[tuple[str, str | None, str | None]] = [("all", None, None)]
    if held:
        sets += [(f"all {h}", None, h) for h in halves]
    for k in kinds:
        sets.append((k, k, None))
        if k in held:
            sets += [(f"{k} {h}", k, h) for h in halves]
    out: dict[str, Any] = {}
    for name, kind, half in sets:
        rs = [r for r in rows if (kind is None or r["category"] == kind)
              and (half is None or r.get("split", "dev") == half)]
        agg = {"n": len(rs)}
        for metric in ("Hit@1", "Hit@5", "MRR", "fresh_first"):
            vals = [r["scores"][metric] for r in rs if metric in r["scores"]]
            if vals:
                agg[metric] = round(sum(vals) / len(vals), 4)
        out[name] = agg
    return out


def run_workstation(client: RecallClient, *, tag: str, log: Callable[[str], None] = print,
                    paths: Paths | None = None, max_results: int = 10) -> dict[str, Any]:
    """The scenario set against a running stack whose watchers watch `paths` (default: read
    from the TR_WATCHERS_* environment the stack was started with)."""
    if paths is None:
        paths = Paths(Path(json.loads(os.environ["TR_WATCHERS_FILESYSTEM__PATHS"])[0]),
                      Path(json.loads(os.environ["TR_WATCHERS_JOURNAL__LOG_FILES"])[0]))
    t0 = time.perf_counter()
    world = make_events(client, paths, log=log, seed=f"workstation:{tag}")
    try:
        make_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        rows = ask(client, questions(world), max_results)
        query_s = time.perf_counter() - t1
    finally:
        world.stop()
    return result(client, tag, world, rows, make_s, query_s, max_results)


def result(client: RecallClient, tag: str, world: World, rows: list[dict[str, Any]],
           make_s: float, query_s: float, max_results: int = 10) -> dict[str, Any]:
    """A run's record: its questions' rows, their summary, the run's timing."""
    lat = [r["latency_ms"] for r in rows]
    return {
        "dataset": "workstation", "run_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "api": client.base, "tag": tag,
        "config": {"timeframe": "all", "maxResults": max_results, "namespace": NAMESPACE},
        "counts": {"scenarios": 7 + len(world.more.values), "questions": len(rows)},
        "skipped": world.more.skipped,
        "timing": {"events_wall_s": round(make_s, 2), "query_wall_s": round(query_s, 2),
                   "recall_p50_ms": round(M.percentile(lat, 50), 1),
                   "recall_p99_ms": round(M.percentile(lat, 99), 1)},
        "summary": summarise(rows), "questions": rows,
    }


def main() -> None:
    from .stack import Stack

    root = Path(tempfile.mkdtemp(prefix="tr-ws-"))
    paths = Paths.make(root)
    with Stack(with_watchers=True, extra_env=paths.stack_env()) as s:
        client = RecallClient(s.api)
        result = run_workstation(client, tag="ws", paths=paths)
        client.close()
    for name, row in result["summary"].items():
        print(f"{name:18s} " + " ".join(f"{k}={v}" for k, v in row.items()))
    for r in result["questions"]:
        if r["scores"]["Hit@5"] < 1:
            print(f"MISS {r['qid']} [{r['category']}] {r['question']}")
            for i, ranked in enumerate(r["ranked"][:3]):
                print(f"    {i + 1}. {ranked[:140]}")


if __name__ == "__main__":
    main()
