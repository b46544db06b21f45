"""Containers watcher: recorded podman 4.3.1 events (`podman events --format json` on this
project's machine: a container exiting 3 with compose labels, one OOM-killed under `--memory 8m`,
one stopped, one killed, one whose health check failed), docker's `{{json .}}` events in the
shape of its documentation, `system df` of both, the kernel log of a real memory-cgroup OOM kill,
and a fake engine CLI for the followed command, its restart and the availability check."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from totalrecall_schema import CATEGORIES, REDACTED, MemoryEvent, Severity
from totalrecall_watchers.adapters.containers import KernelLog
from totalrecall_watchers.adapters.containers_watcher import ContainersWatcher
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.containers_disk import DiskRow, parse_df, parse_size
from totalrecall_watchers.core.containers_events import (
    EngineEvent,
    OomEvidence,
    format_since,
    parse_event,
    parse_time_ns,
)
from totalrecall_watchers.core.containers_lifecycle import ContainerLifecycle
from totalrecall_watchers.settings import ContainersSettings, Settings

DATA = Path(__file__).resolve().parents[2] / "data" / "containers"
PODMAN_LINES = (DATA / "podman-4.3.1-events.jsonl").read_text().splitlines()
EXIT3_ID = "15a1f41a5a9e59f13d47e8d38ab4264d52bfa57c806b4f1ffe688ef8d932a5cb"
OOM_ID = "5d6aa5bacb74afd77048dcb3170a56e2139cad8dbf9f77fd22603504697c1a4a"
GB = 10**9


def podman_lines(name: str) -> list[str]:
    return [ln for ln in PODMAN_LINES if f'"Name":"{name}"' in ln]


def docker_line(action: str, cid: str = "c0ffee" * 10 + "abcd", name: str = "web",
                image: str = "nginx:1.25", t: int = 1_764_000_000, **attrs: str) -> str:
    """A line of `docker events --format '{{json .}}'` as its documentation shows one."""
    status = action
    return json.dumps({
        "status": status, "id": cid, "from": image, "Type": "container", "Action": action,
        "Actor": {"ID": cid, "Attributes": {"image": image, "name": name, **attrs}},
        "scope": "local", "time": t, "timeNano": t * 10**9 + 123456789})


def lifecycle(clock: FakeClock, **kw: Any) -> ContainerLifecycle:
    kw.setdefault("label_keys", ContainersSettings().labels)
    return ContainerLifecycle(EventContext(hostname="ws1", clock=clock), **kw)


def feed_all(lc: ContainerLifecycle, clock: FakeClock, engine: str, lines: list[str],
             oom: OomEvidence | None = None, step: float = 0.1) -> list[MemoryEvent]:
    out: list[MemoryEvent] = []
    for line in lines:
        ev = parse_event(engine, line)
        if ev is None:
            continue
        clock.advance(step)
        out += lc.feed(ev, clock.monotonic(), oom if lc.needs_oom_probe(ev, clock.monotonic())
                       else None)
    return out


# --- parsing --------------------------------------------------------------------------------
def test_podman_lines_parse() -> None:
    died = parse_event("podman", podman_lines("trexp-exit3")[4])
    assert died is not None
    assert (died.action, died.exit_code, died.id, died.name) == ("die", 3, EXIT3_ID, "trexp-exit3")
    assert died.image == "localhost/tr-containers-exp:latest" and died.short_id == EXIT3_ID[:12]
    assert died.labels == {"com.docker.compose.project": "demo",
                           "com.docker.compose.service": "web"}
    assert died.time_ns == parse_time_ns("2026-11-29T06:19:19.502915928Z")
    assert died.at is not None and died.at.isoformat().startswith("2026-11-29T06:19:19.5029")
    health = [parse_event("podman", ln) for ln in podman_lines("trexp-health")
              if "health_status" in ln]
    assert [(h.action, h.health) for h in health if h] == [("health", "starting"),
                                                           ("health", "unhealthy")]
    image_pull = next(ln for ln in PODMAN_LINES if '"Type":"image"' in ln)
    assert parse_event("podman", image_pull) is None
    with pytest.raises(ValueError):
        parse_event("podman", "not json")
    with pytest.raises(ValueError):
        parse_event("podman", '{"foo": 1}')


def test_docker_lines_parse() -> None:
    die = parse_event("docker", docker_line("die", exitCode="3", **{
        "com.docker.compose.project": "shop", "execDuration": "12"}))
    assert die is not None and (die.action, die.exit_code, die.name) == ("die", 3, "web")
    assert die.labels == {"com.docker.compose.project": "shop"}
    assert die.time_ns == 1_764_000_000_123_456_789
    h = parse_event("docker", docker_line("health_status: unhealthy"))
    assert h is not None and (h.action, h.health) == ("health", "unhealthy")
    k = parse_event("docker", docker_line("kill", signal="15"))
    assert k is not None and (k.action, k.signal) == ("kill", 15)
    d = parse_event("docker", docker_line("destroy"))
    assert d is not None and d.action == "remove"
    net = json.dumps({"Type": "network", "Action": "connect", "Actor": {"ID": "x"}})
    assert parse_event("docker", net) is None


def test_times() -> None:
    ns = parse_time_ns("2026-11-29T06:19:19.274197836Z")
    assert ns is not None and ns % 10**9 == 274197836
    assert format_since(ns) == "2026-11-29T06:19:19.274197836Z"
    assert parse_time_ns("2026-11-29T07:19:19.5+01:00") == parse_time_ns("2026-11-29T06:19:19.5Z")
    assert parse_time_ns(1_764_000_000) == 1_764_000_000 * 10**9
    assert parse_time_ns("yesterday") is None and parse_time_ns(None) is None


# --- lifecycle ------------------------------------------------------------------------------
def test_podman_exit_code_3_with_compose_labels() -> None:
    clock = FakeClock()
    lc = lifecycle(clock)
    got = feed_all(lc, clock, "podman", podman_lines("trexp-exit3"))
    assert [(e.category, e.subcategory) for e in got] == [("system.container", "start"),
                                                           ("system.container", "die")]
    start, die = got
    assert start.severity == Severity.INFO and die.severity == Severity.ERROR
    assert die.summary == ("podman container 'trexp-exit3' (image localhost/tr-containers-exp"
                           ":latest) died with exit code 3 — compose project demo, service web")
    x = die.metadata.model_extra or {}
    assert die.metadata.exit_code == 3 and die.source == "watcher.containers"
    assert x["container_id"] == EXIT3_ID[:12] and x["engine"] == "podman"
    assert x["container_name"] == "trexp-exit3" and x["oom_killed"] is False
    assert x["compose_project"] == "demo" and x["compose_service"] == "web"
    assert x["labels"] == {"com.docker.compose.project": "demo",
                           "com.docker.compose.service": "web"}
    assert "podman logs trexp-exit3" in die.detail
    # The engine's time and an id derived from its event: a replay is the same event.
    assert die.timestamp.isoformat().startswith("2026-11-29T06:19:19.502915")
    again = feed_all(lifecycle(FakeClock()), FakeClock(), "podman", podman_lines("trexp-exit3"))
    assert [e.id for e in again] == [e.id for e in got] and die.id.startswith("ctr-")


def test_podman_oom_kill_found_by_the_probe() -> None:
    clock = FakeClock()
    lc = lifecycle(clock)
    evidence = OomEvidence(True, "kernel log (oom-kill record of its cgroup)", 8 * 1024 * 1024,
                           kernel_lines=("oom-kill:constraint=CONSTRAINT_MEMCG,…",
                                         "Memory cgroup out of memory: Killed process 8014 (sh) "
                                         "total-vm:16940kB"))
    got = feed_all(lc, clock, "podman", podman_lines("trexp-oom"), oom=evidence)
    assert [e.subcategory for e in got] == ["start", "oom"]
    oom = got[1]
    assert oom.severity == Severity.ERROR and oom.metadata.exit_code == 137
    assert oom.summary == ("podman container 'trexp-oom' (image localhost/tr-containers-exp:"
                           "latest) was killed by the kernel's OOM killer (out of memory), exit "
                           "code 137, memory limit 8.4 MB")
    x = oom.metadata.model_extra or {}
    assert x["oom_killed"] is True and x["killed_process"] == "sh" and x["killed_pid"] == 8014
    assert x["memory_limit_bytes"] == 8 * 1024 * 1024 and "oom" in oom.metadata.tags
    assert "kernel: Memory cgroup out of memory" in oom.detail


def test_a_sigkill_that_was_not_the_oom_killer_is_a_death() -> None:
    clock = FakeClock()
    lc = lifecycle(clock)
    got = feed_all(lc, clock, "podman", podman_lines("trexp-oom"),
                   oom=OomEvidence(False, checked=("podman inspect", "the kernel log")))
    die = got[-1]
    assert die.subcategory == "die" and die.severity == Severity.ERROR
    assert die.summary.endswith("died: killed by SIGKILL (exit code 137)")
    assert "Not killed by the OOM killer as far as podman inspect and the kernel log tell" \
        in die.detail


def test_stop_and_kill_on_request_are_stops_not_deaths() -> None:
    clock = FakeClock()
    lc = lifecycle(clock)
    stopped = feed_all(lc, clock, "podman", podman_lines("trexp-long"))
    assert [e.subcategory for e in stopped] == ["start", "stop"]
    assert stopped[1].severity == Severity.INFO
    assert stopped[1].summary.endswith("was stopped (podman stop), exit code 137 (SIGKILL)")
    killed = feed_all(lc, clock, "podman", podman_lines("trexp-kill"))
    assert [e.subcategory for e in killed] == ["start", "stop"]
    assert "(podman kill), exit code 137" in killed[1].summary
    # The death after a kill needs no OOM lookup: somebody asked for it.
    lines = podman_lines("trexp-kill")
    lc2 = lifecycle(clock)
    feed_all(lc2, clock, "podman", lines[:4])
    ev = parse_event("podman", lines[4])
    assert ev is not None and ev.action == "die" and ev.exit_code == 137
    assert not lc2.needs_oom_probe(ev, clock.monotonic())
    assert lifecycle(clock).needs_oom_probe(ev, clock.monotonic())  # nobody asked: look it up


def test_docker_stop_oom_and_clean_exit() -> None:
    clock = FakeClock()
    lc = lifecycle(clock)
    # docker stop: kill(SIGTERM), die(0), stop → one stop event.
    got = feed_all(lc, clock, "docker", [docker_line("start"), docker_line("kill", signal="15"),
                                         docker_line("die", exitCode="0"), docker_line("stop")])
    assert [e.subcategory for e in got] == ["start", "stop"]
    assert "(docker stop or kill, SIGTERM), exit code 0" in got[1].summary
    # oom then die → one oom event with the exit code.
    cid = "0f" * 32
    got = feed_all(lc, clock, "docker", [docker_line("start", cid=cid, name="worker"),
                                         docker_line("oom", cid=cid, name="worker"),
                                         docker_line("die", cid=cid, name="worker",
                                                     exitCode="137")])
    assert [e.subcategory for e in got] == ["start", "oom"]
    assert "'worker' (image nginx:1.25) was killed by the kernel's OOM killer (out of memory)" \
        ", exit code 137" in got[1].summary
    assert (got[1].metadata.model_extra or {})["oom_source"] == "docker oom event"
    # A clean exit is news of its own kind.
    got = feed_all(lc, clock, "docker", [docker_line("start", cid="1" * 64, name="job"),
                                         docker_line("die", cid="1" * 64, name="job",
                                                     exitCode="0")])
    assert [(e.subcategory, e.severity) for e in got] == [("start", Severity.INFO),
                                                          ("exit", Severity.INFO)]
    # A non-fatal signal is not a stop: the crash after it is a death.
    got = feed_all(lc, clock, "docker", [docker_line("kill", cid="2" * 64, signal="1"),
                                         docker_line("die", cid="2" * 64, exitCode="2")])
    assert [e.subcategory for e in got] == ["die"]


def test_docker_oom_without_death_is_reported_when_due() -> None:
    clock = FakeClock()
    lc = lifecycle(clock, oom_wait_s=5)
    assert feed_all(lc, clock, "docker", [docker_line("start"), docker_line("oom")])[0] \
        .subcategory == "start"
    assert lc.next_due() is not None and lc.due(clock.monotonic()) == []
    clock.advance(5)
    (ev,) = lc.due(clock.monotonic())
    assert ev.subcategory == "oom" and ev.summary.startswith(
        "A process in docker container 'web' (image nginx:1.25) was killed by the kernel's OOM "
        "killer (out of memory); the container kept running")
    assert lc.next_due() is None


def test_health_transitions_only() -> None:
    clock = FakeClock()
    lc = lifecycle(clock)
    lines = podman_lines("trexp-health")
    got = feed_all(lc, clock, "podman", lines[:lines.index(next(
        ln for ln in lines if '"unhealthy"' in ln)) + 1])
    assert [e.subcategory for e in got] == ["start", "health"]
    h = got[1]
    assert h.severity == Severity.WARNING
    assert h.summary == ("podman container 'trexp-health' (image localhost/tr-containers-exp:"
                         "latest) became unhealthy (its health check fails); was starting")
    assert (h.metadata.model_extra or {})["health"] == "unhealthy"
    line = next(ln for ln in podman_lines("trexp-health") if '"unhealthy"' in ln)

    def health(status: str, t: str) -> str:
        return line.replace('"unhealthy"', f'"{status}"').replace("06:20:05.78", t)

    assert feed_all(lc, clock, "podman", [health("unhealthy", "06:20:35.78")]) == []
    (ok,) = feed_all(lc, clock, "podman", [health("healthy", "06:21:05.78")])
    assert ok.severity == Severity.INFO and "is healthy again" in ok.summary
    assert feed_all(lc, clock, "podman", [health("healthy", "06:21:35.78")]) == []
    # A container first seen healthy (the watcher started after it) is not news.
    lc2 = lifecycle(clock)
    assert feed_all(lc2, clock, "podman", [health("healthy", "06:22:05.78")]) == []


def test_a_crash_loop_is_one_event_per_window() -> None:
    clock = FakeClock()
    lc = lifecycle(clock, dedup_window_s=300)
    lines = []
    for i in range(10):
        lines += [docker_line("start", t=1_764_000_000 + i), docker_line("die", exitCode="1",
                                                                          t=1_764_000_000 + i)]
    got = feed_all(lc, clock, "docker", lines, step=1)
    assert [e.subcategory for e in got] == ["start", "die"]
    assert lc.deduplicated == 18
    clock.advance(300)
    got = feed_all(lc, clock, "docker", [docker_line("start", t=1_764_001_000),
                                         docker_line("die", exitCode="1", t=1_764_001_000)])
    assert [e.subcategory for e in got] == ["start", "die"]
    assert (got[1].metadata.model_extra or {})["repeats"] == 9
    assert "9 more like it within 300 s before were not reported separately" in got[1].detail
    # Another exit code is other news.
    assert feed_all(lc, clock, "docker", [docker_line("die", exitCode="2", t=1_764_001_001)])


def test_events_choose_kinds_and_values_are_scrubbed() -> None:
    clock = FakeClock()
    lc = lifecycle(clock, kinds=["die", "oom"])
    token = "ghp_" + "a1B2c3D4" * 5
    got = feed_all(lc, clock, "docker", [
        docker_line("start"),
        docker_line("die", exitCode="1", name="api-TOKEN=hunter2hunter2", **{
            "com.docker.compose.project": f"https://{token}@github.com/x",
            "com.example.secret": "API_KEY=abc123abc123"})])
    (die,) = got
    x = die.metadata.model_extra or {}
    dumped = die.model_dump_json()
    assert token not in dumped and "hunter2hunter2" not in dumped
    assert REDACTED in x["compose_project"]
    assert "com.example.secret" not in x["labels"] and "abc123abc123" not in dumped


# --- kernel log -----------------------------------------------------------------------------
def test_kernel_log_finds_the_oom_kill_of_the_container() -> None:
    path = DATA / "kmsg-memcg-oom.txt"
    log = KernelLog(str(path), monotonic=lambda: 11100.0)
    lines = log.find_oom_kill(OOM_ID, lookback_s=60)
    assert len(lines) == 3
    assert lines[0] == "memory: usage 8192kB, limit 8192kB, failcnt 119"
    assert lines[1].startswith("oom-kill:constraint=CONSTRAINT_MEMCG") and OOM_ID in lines[1]
    assert lines[2].startswith("Memory cgroup out of memory: Killed process 8014 (sh)")
    assert log.find_oom_kill(EXIT3_ID, lookback_s=60) == ()  # another container
    assert KernelLog(str(path), monotonic=lambda: 20000.0).find_oom_kill(OOM_ID, 60) == ()
    assert log.check() is None
    assert "No such file" in (KernelLog(str(path) + ".missing").check() or "")


# --- a fake engine CLI ----------------------------------------------------------------------
FAKE_CLI = """\
import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
with open(os.path.join(here, "calls.log"), "a") as f:
    f.write(json.dumps(args) + "\\n")
def data(name):
    p = os.path.join(here, name)
    return open(p).read() if os.path.exists(p) else None
if args[:1] == ["version"]:
    v = data("version.txt")
    if v is None:
        print("Cannot connect to the engine. Is the daemon running?", file=sys.stderr)
        sys.exit(1)
    print(v)
    sys.exit(0)
if args[:1] == ["events"]:
    sys.stdout.write(data("events.jsonl") or "")
    sys.stdout.flush()
    if os.path.exists(os.path.join(here, "events.hold")):
        time.sleep(60)
    print("events stream ended", file=sys.stderr)
    sys.exit(2)
if args[:2] == ["container", "inspect"]:
    out = data("inspect.json")
    if out is None:
        print("no such container", file=sys.stderr)
        sys.exit(125)
    print(out)
    sys.exit(0)
if args[:2] == ["system", "df"]:
    print(data("df.jsonl") or "garbage")
    sys.exit(0)
sys.exit(64)
"""


def fake_engine(root: Path, engine: str, version: str | None = "Version:      4.3.1") -> Path:
    d = root / engine
    d.mkdir(parents=True)
    cli = d / engine
    cli.write_text(f"#!{sys.executable}\n" + FAKE_CLI)
    cli.chmod(0o755)
    if version is not None:
        (d / "version.txt").write_text(version)
    return cli


def calls(cli: Path) -> list[list[str]]:
    log = cli.parent / "calls.log"
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def watcher(tmp_path: Path, clis: dict[str, Path], **kw: Any) -> ContainersWatcher:
    kw.setdefault("kernel_log", "")
    s = ContainersSettings(engines=list(clis), cli={k: str(v) for k, v in clis.items()}, **kw)
    return ContainersWatcher(EventContext(hostname="ws1", clock=FakeClock()), s)


def test_availability(tmp_path: Path) -> None:
    w = watcher(tmp_path, {"podman": tmp_path / "nope" / "podman",
                           "docker": fake_engine(tmp_path, "docker", version=None)})
    reason = w.check_available()
    assert reason is not None and reason.startswith("no container engine: podman (")
    assert "not found on PATH" in reason
    assert "docker (`docker version` failed: Cannot connect to the engine" in reason
    podman = fake_engine(tmp_path, "podman")
    w = watcher(tmp_path, {"podman": podman, "docker": tmp_path / "docker" / "docker"})
    assert w.check_available() is None
    assert w.note is not None and w.note.startswith("engines: podman 4.3.1; absent: docker (")
    assert "OOM kills from: podman inspect" in w.note
    # A docker that is podman (podman-docker, podman's socket) is followed once.
    other = fake_engine(tmp_path / "alias", "docker",
                        version="Client:       Podman Engine\nVersion:      4.3.1")
    w = watcher(tmp_path, {"docker": other, "podman": podman})
    assert w.check_available() is None and [e.name for e in w.engines] == ["podman"]
    assert "docker (answers as podman" in (w.note or "")
    # Unreadable kernel log: said in the note, the inspect still used.
    w = watcher(tmp_path, {"podman": podman}, kernel_log=str(tmp_path / "no-kmsg"))
    assert w.check_available() is None and "kernel log unreadable" in (w.note or "")


async def test_the_followed_command_restarts_from_where_it_stopped(tmp_path: Path) -> None:
    cli = fake_engine(tmp_path, "podman")
    lines = podman_lines("trexp-exit3") + podman_lines("trexp-oom")
    (cli.parent / "events.jsonl").write_text("\n".join(lines) + "\n")
    (cli.parent / "inspect.json").write_text(json.dumps([{
        "Id": OOM_ID, "State": {"OOMKilled": True, "ExitCode": 137},
        "HostConfig": {"Memory": 8388608}}]))
    w = watcher(tmp_path, {"podman": cli}, disk=False)
    assert w.check_available() is None and w.streaming
    got: list[MemoryEvent] = []

    async def emit(e: MemoryEvent) -> bool:
        got.append(e)
        return True

    stop = asyncio.Event()
    with pytest.raises(RuntimeError, match="exited with 2: events stream ended"):
        await asyncio.wait_for(w.run(emit, stop), 20)
    assert [e.subcategory for e in got] == ["start", "die", "start", "oom"]
    oom = got[3]
    assert (oom.metadata.model_extra or {})["oom_source"] == "podman inspect (State.OOMKilled)"
    assert oom.summary.endswith("exit code 137, memory limit 8.4 MB")
    first = calls(cli)
    # From the moment it started following: nothing before the subscription is missed.
    assert ["events", "--format", "json", "--filter", "type=container", "--since",
            format_since(int(w.ctx.clock.now().timestamp() * 10**9))] in first
    assert ["container", "inspect", OOM_ID] in first
    # The runner restarts it: from the last event seen; the ones replayed are skipped.
    with pytest.raises(RuntimeError):
        await asyncio.wait_for(w.run(emit, stop), 20)
    assert len(got) == 4
    again = [c for c in calls(cli) if c[:1] == ["events"]][-1]
    assert again[-2:] == ["--since", "2026-11-29T06:19:22.915337314Z"]
    st = w.stats()
    assert st["restarts"] == 1 and st["replayed"] == len([ln for ln in lines
                                                          if '"Type":"container"' in ln])
    assert st["oom_probes"] == 1


async def test_stop_ends_the_followed_command(tmp_path: Path) -> None:
    cli = fake_engine(tmp_path, "podman")
    (cli.parent / "events.jsonl").write_text("\n".join(podman_lines("trexp-exit3")) + "\n")
    (cli.parent / "events.hold").write_text("")
    (cli.parent / "df.jsonl").write_text((DATA / "podman-4.3.1-system-df.jsonl").read_text())
    w = watcher(tmp_path, {"podman": cli}, disk_reclaimable_gb=1)
    assert w.check_available() is None
    got: list[MemoryEvent] = []

    async def emit(e: MemoryEvent) -> bool:
        got.append(e)
        return True

    stop = asyncio.Event()
    task = asyncio.create_task(w.run(emit, stop))
    deadline = asyncio.get_running_loop().time() + 20
    while len(got) < 3:
        assert asyncio.get_running_loop().time() < deadline, got
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 10)
    assert sorted(e.subcategory for e in got) == ["die", "disk", "start"]
    assert w.stats()["disk_polls"] == 1


# --- disk use -------------------------------------------------------------------------------
DOCKER_DF = "\n".join(json.dumps(r) for r in [
    {"Active": "2", "Reclaimable": "3.2GB (72%)", "Size": "4.444GB", "TotalCount": "8",
     "Type": "Images"},
    {"Active": "1", "Reclaimable": "1.09kB (100%)", "Size": "1.09kB", "TotalCount": "2",
     "Type": "Containers"},
    {"Active": "1", "Reclaimable": "0B (0%)", "Size": "38.45MB", "TotalCount": "2",
     "Type": "Local Volumes"},
    {"Active": "0", "Reclaimable": "1.2GB", "Size": "1.2GB", "TotalCount": "30",
     "Type": "Build Cache"}])


def test_parse_df_of_both_engines() -> None:
    rows = parse_df((DATA / "podman-4.3.1-system-df.jsonl").read_text())
    assert rows[0] == DiskRow("images", 147, 0, 47451327809, 47451327809)
    assert [r.kind for r in rows] == ["images", "containers", "volumes"]
    rows = parse_df(DOCKER_DF)
    assert rows[0] == DiskRow("images", 8, 2, 4_444_000_000, 3_200_000_000)
    assert rows[1].size == 1090 and rows[3] == DiskRow("build_cache", 30, 0, 1_200_000_000,
                                                       1_200_000_000)
    newer = json.dumps([{"Type": "Images", "Total": 3, "Active": 1, "RawSize": 5000,
                         "RawReclaimable": 2000, "TotalCount": 3, "Size": "5kB",
                         "Reclaimable": "2kB (40%)"}], indent=4)  # podman >= 4.4 --format json
    assert parse_df(newer) == [DiskRow("images", 3, 1, 5000, 2000)]
    assert parse_size("2GiB") == 2 * 1024**3 and parse_size("0B") == 0
    with pytest.raises(ValueError):
        parse_df("json")  # what podman 4.3's `system df --format json` prints


def rows(images: float, reclaimable: float, volumes: float = 0.5) -> list[DiskRow]:
    return [DiskRow("images", 10, 2, int(images * GB), int(reclaimable * GB)),
            DiskRow("containers", 3, 1, 20_000_000, 15_000_000),
            DiskRow("volumes", 2, 1, int(volumes * GB), 0)]


def test_disk_events_on_crossings_and_big_changes_only(tmp_path: Path) -> None:
    w = watcher(tmp_path, {"podman": tmp_path / "podman"}, disk_total_gb=50,
                disk_reclaimable_gb=5, disk_change_fraction=0.25, disk_min_change_gb=1)
    assert w.disk_check("podman", rows(4, 3.2)) is None  # the baseline
    assert w.disk_check("podman", rows(4.5, 3.6)) is None  # a small change
    ev = w.disk_check("podman", rows(9, 6.2))
    assert ev is not None and ev.severity == Severity.WARNING and ev.subcategory == "disk"
    assert ev.summary == ("podman container storage: 6.2 GB could be reclaimed (threshold 5.0 GB);"
                          " images grew from 4.0 GB to 9.0 GB — 6.2 GB of images reclaimable "
                          "(podman image prune -a); 15.0 MB of stopped containers reclaimable "
                          "(podman container prune); 9.5 GB in all")
    x = ev.metadata.model_extra or {}
    assert x["reclaimable_bytes"] == int(6.2 * GB) + 15_000_000
    assert x["images_reclaimable_bytes"] == int(6.2 * GB) and x["reasons"] == [
        "reclaimable", "images"]
    assert "never deletes anything" in ev.detail
    assert w.disk_check("podman", rows(9.2, 6.4)) is None  # still over: once per crossing
    assert w.disk_check("podman", rows(9.2, 4.5)) is None  # not below 4 GB: not re-armed
    shrank = w.disk_check("podman", rows(2, 0.1))
    assert shrank is not None and shrank.severity == Severity.INFO
    assert "images shrank from 9.0 GB to 2.0 GB" in shrank.summary
    again = w.disk_check("podman", rows(8, 5.5))
    assert again is not None and "could be reclaimed" in again.summary
    # The total threshold, per engine.
    big = w.disk_check("docker", rows(60, 0.0))
    assert big is not None and "its storage reached 60.5 GB (threshold 50.0 GB)" in big.summary
    assert "nothing reclaimable" not in big.summary  # 15 MB of containers is worth naming


def test_settings_from_env_and_taxonomy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TR_WATCHERS_CONTAINERS__ENGINES", '["docker"]')
    monkeypatch.setenv("TR_WATCHERS_CONTAINERS__INTERVAL_S", "120")
    monkeypatch.setenv("TR_WATCHERS_CONTAINERS__DISK_RECLAIMABLE_GB", "2.5")
    monkeypatch.setenv("TR_WATCHERS_CONTAINERS__EVENTS", '["die", "oom"]')
    s = Settings().containers
    assert s.engines == ["docker"] and s.interval_s == 120 and s.disk_reclaimable_gb == 2.5
    assert s.events == ["die", "oom"]
    d = ContainersSettings()
    assert d.engines == ["podman", "docker"] and d.interval_s == 600
    assert d.events == ["start", "stop", "exit", "die", "oom", "health"]
    assert set(CATEGORIES["system.container"]) >= {"start", "stop", "exit", "die", "oom",
                                                    "health", "disk"}
    monkeypatch.setenv("TR_WATCHERS_CONTAINERS__ENGINES", '["lxc"]')
    with pytest.raises(ValueError):
        Settings()


def test_engine_event_key_is_unique_per_event() -> None:
    a = EngineEvent("podman", "die", "x" * 64, time_ns=1, raw_action="died")
    b = EngineEvent("podman", "die", "x" * 64, time_ns=2, raw_action="died")
    assert a.key != b.key and a.key == EngineEvent("podman", "die", "x" * 64, time_ns=1,
                                                   raw_action="died").key
    assert os.sep not in a.short_id
