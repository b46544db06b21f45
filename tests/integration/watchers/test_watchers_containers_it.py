"""The REAL podman of this machine → `system.container` on the real events stream: a container
exiting 3 (with compose labels), one OOM-killed under `--memory 8m`, a health check failing and
passing again, and the disk-use event of `podman system df`.

No image is pulled: a tiny image is imported from this machine's own `/bin/sh` and `/bin/sleep`
(with the libraries `ldd` names) and removed at the end, with every container made here."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from totalrecall_schema import MemoryEvent, Severity, Topology
from waiting import wait_for
from watchers_it_helpers import StreamReader, make_settings, running, wait_until

PODMAN = shutil.which("podman")


def _podman_answers() -> str | None:
    if PODMAN is None:
        return "podman is not installed"
    try:
        proc = subprocess.run([PODMAN, "version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`podman version` failed: {exc}"
    return None if proc.returncode == 0 else f"`podman version` failed: {proc.stderr.strip()}"


pytestmark = pytest.mark.skipif(_podman_answers() is not None,
                                reason=f"no usable podman: {_podman_answers()}")


def _copy_with_libraries(binary: str, root: Path) -> None:
    path = shutil.which(binary)
    if path is None:
        pytest.skip(f"{binary} not found: cannot build the test image offline")
    shutil.copy2(path, root / "bin" / Path(binary).name)
    ldd = subprocess.run(["ldd", path], capture_output=True, text=True)
    for line in ldd.stdout.splitlines():  # "libc.so.6 => /lib/…/libc.so.6 (0x…)", "/lib64/ld…"
        lib = next((p for p in line.split() if p.startswith("/")), None)
        if lib is None:
            continue
        dest = root / lib.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib, dest)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An image made of this machine's /bin/sh and /bin/sleep, imported, removed at the end."""
    assert PODMAN is not None
    work = tmp_path_factory.mktemp("image")
    root = work / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "tmp").mkdir()
    for binary in ("sh", "sleep"):
        _copy_with_libraries(binary, root)
    tar = work / "rootfs.tar"
    with tarfile.open(tar, "w") as t:
        t.add(root, arcname=".")
    tag = f"localhost/totalrecall-it-containers:{uuid.uuid4().hex[:8]}"
    proc = subprocess.run([PODMAN, "import", "-q", str(tar), tag], capture_output=True,
                          text=True, timeout=120)
    if proc.returncode != 0:
        pytest.skip(f"`podman import` failed: {proc.stderr.strip()[:300]}")
    try:
        yield tag
    finally:
        subprocess.run([PODMAN, "rmi", "-f", tag], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def run_prefix(image: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str],
                                                                             dict[str, str]]:
    """How containers run here: plain `podman run`, else the workaround of a machine with
    hybrid cgroups (crun refuses them: runc, cgroupfs) whose default rlimits are not permitted
    (a containers.conf with `default_ulimits = []`)."""
    assert PODMAN is not None
    # Some conmon builds write an `oom` file into the working directory of `podman run` when
    # the OOM killer strikes (where podman never looks): run them in a directory of their own.
    env = dict(os.environ, TR_IT_CWD=str(tmp_path_factory.mktemp("cwd")))
    plain = subprocess.run([PODMAN, "run", "--rm", image, "/bin/sh", "-c", "exit 0"],
                           capture_output=True, text=True, timeout=120, env=env,
                           cwd=env["TR_IT_CWD"])
    if plain.returncode == 0:
        return [PODMAN, "run"], env
    conf = tmp_path_factory.mktemp("conf") / "containers.conf"
    conf.write_text("[containers]\ndefault_ulimits = []\n")
    env["CONTAINERS_CONF"] = str(conf)
    prefix = [PODMAN, "--runtime", "runc", "--cgroup-manager=cgroupfs", "run"]
    fallback = subprocess.run([*prefix, "--rm", image, "/bin/sh", "-c", "exit 0"],
                              capture_output=True, text=True, timeout=120, env=env,
                              cwd=env["TR_IT_CWD"])
    if fallback.returncode != 0:
        pytest.skip(f"podman cannot run a container here: {plain.stderr.strip()[:200]} / "
                    f"{fallback.stderr.strip()[:200]}")
    return prefix, env


@pytest.fixture
def names() -> Iterator[list[str]]:
    """Containers made by a test, removed after it."""
    made: list[str] = []
    yield made
    assert PODMAN is not None
    for name in made:
        subprocess.run([PODMAN, "rm", "-f", "-t", "0", name], capture_output=True, timeout=120)


def _settings(nats_url: str, topology: Topology, tr_home: Path, **containers: Any) -> Any:
    s = make_settings(nats_url, topology, tr_home, enable=("containers",))
    s.containers.engines = ["podman"]
    s.containers.interval_s = 2.0
    for k, v in containers.items():
        setattr(s.containers, k, v)
    # Other containers of this machine (other tests, other users) must not eat the budget.
    s.rate_limit.per_watcher_per_hour = s.rate_limit.global_per_hour = 100_000
    s.rate_limit.per_watcher_burst = s.rate_limit.global_burst = 10_000
    return s


def _of(ev: MemoryEvent, name: str, *subcategories: str) -> bool:
    x = ev.metadata.model_extra or {}
    return ev.category == "system.container" and x.get("container_name") == name \
        and ev.subcategory in subcategories


async def _running(app: Any) -> None:
    runner = app.state.runner
    await wait_until(lambda: runner.status["containers"].state != "starting", 60,
                     "the containers watcher to start")
    st = runner.status["containers"]
    assert st.state == "running", (st.state, st.reason)
    # No wait for `podman events` to subscribe: it follows from the moment it started
    # (`--since`), so a container run before the subscription is seen all the same.


async def _sh(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A command in a thread: the watcher (on this event loop) reads its events meanwhile."""
    return await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True,
                                   env=env, timeout=120, cwd=env["TR_IT_CWD"])


async def test_exit_code_and_disk_use(nats_url: str, topology: Topology, tr_home: Path,
                                      reader: StreamReader, image: str,
                                      run_prefix: tuple[list[str], dict[str, str]],
                                      names: list[str]) -> None:
    prefix, env = run_prefix
    name = f"tr-it-exit3-{uuid.uuid4().hex[:6]}"
    names.append(name)
    settings = _settings(nats_url, topology, tr_home, disk_reclaimable_gb=0.000001)
    async with running(settings) as app:
        await _running(app)
        proc = await _sh([*prefix, "--name", name, "--label",
                          "com.docker.compose.project=itshop", "--label",
                          "com.docker.compose.service=worker", image, "/bin/sh", "-c", "exit 3"],
                         env)
        assert proc.returncode == 3, proc.stderr
        die, headers = await reader.wait_for(lambda e: _of(e, name, "die"), 30,
                                             f"the death of {name}")
        disk, _ = await reader.wait_for(
            lambda e: e.category == "system.container" and e.subcategory == "disk", 30,
            "the disk-use event")
        started, _ = await reader.wait_for(lambda e: _of(e, name, "start"), 5, "its start")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as client:
            health = (await client.get("/health")).json()

    assert headers.get("Nats-Msg-Id") == die.key
    assert die.severity == Severity.ERROR and die.metadata.exit_code == 3
    assert die.source == "watcher.containers"
    assert f"podman container '{name}' (image {image}) died with exit code 3" in die.summary
    assert "compose project itshop, service worker" in die.summary
    x = die.metadata.model_extra or {}
    assert x["engine"] == "podman" and len(x["container_id"]) == 12
    assert x["compose_project"] == "itshop" and x["compose_service"] == "worker"
    assert x["oom_killed"] is False
    assert started.severity == Severity.INFO and started.timestamp <= die.timestamp

    d = disk.metadata.model_extra or {}
    assert d["engine"] == "podman" and disk.severity == Severity.WARNING
    assert d["total_bytes"] > 0 and d["images_count"] >= 1 and "reclaimable" in d["reasons"]
    assert "could be reclaimed (threshold 1.0 kB)" in disk.summary
    assert "never deletes anything" in disk.detail
    disk_events = [e for e in await reader.events()
                   if e.category == "system.container" and e.subcategory == "disk"]
    assert len(disk_events) == 1, [e.summary for e in disk_events]  # once per crossing

    w = health["watchers"]["containers"]
    assert w["state"] == "running" and w["note"].startswith("engines: podman"), w
    assert w["disk_polls"] >= 1 and w["events_seen"] >= 2, w

    nc = await nats.connect(nats_url)
    try:
        msg = await nc.jetstream().get_last_msg(
            topology.events_stream, topology.events_subject("system.container"))
    finally:
        await nc.close()
    assert MemoryEvent.model_validate_json(msg.data).category == "system.container"


async def test_oom_kill(nats_url: str, topology: Topology, tr_home: Path,
                        reader: StreamReader, image: str,
                        run_prefix: tuple[list[str], dict[str, str]], names: list[str]) -> None:
    prefix, env = run_prefix
    name = f"tr-it-oom-{uuid.uuid4().hex[:6]}"
    names.append(name)
    settings = _settings(nats_url, topology, tr_home, disk=False)
    async with running(settings) as app:
        await _running(app)
        # The shell doubles a string until the 8 MiB memory cgroup is full.
        proc = await _sh([*prefix, "--name", name, "--memory", "8m", image, "/bin/sh", "-c",
                          'x=aaaaaaaaaaaaaaaa; while :; do x="$x$x"; done'], env)
        if proc.returncode != 137:
            pytest.skip(f"the container was not OOM-killed here (exit code {proc.returncode}: "
                        f"{proc.stderr.strip()[:200]}): memory limits are not enforced (no "
                        "memory cgroup controller, or rootless without its delegation)")
        ev, _ = await reader.wait_for(lambda e: _of(e, name, "oom", "die"), 30,
                                      f"the OOM kill of {name}")
        note = app.state.runner.health()["containers"].get("note", "")
    if ev.subcategory == "die" and "kernel log unreadable" in note:
        pytest.skip("podman did not flag the OOM kill (State.OOMKilled false) and the kernel "
                    f"log cannot be read here: {note}")
    assert ev.subcategory == "oom", (ev.summary, ev.detail)
    assert ev.severity == Severity.ERROR and ev.metadata.exit_code == 137
    assert f"podman container '{name}' (image {image}) was killed by the kernel's OOM killer " \
           "(out of memory), exit code 137" in ev.summary
    x = ev.metadata.model_extra or {}
    assert x["oom_killed"] is True and x["oom_source"], x
    if x["oom_source"].startswith("kernel log"):
        assert "kernel: oom-kill:" in ev.detail and x["killed_process"] == "sh"
        assert x["memory_limit_bytes"] == 8 * 1024 * 1024  # "memory: usage …, limit 8192kB"
        assert "memory limit 8.4 MB" in ev.summary


async def test_health_transitions(nats_url: str, topology: Topology, tr_home: Path,
                                  reader: StreamReader, image: str,
                                  run_prefix: tuple[list[str], dict[str, str]],
                                  names: list[str]) -> None:
    assert PODMAN is not None
    prefix, env = run_prefix
    base = prefix[:-1]  # the global options, without `run`
    name = f"tr-it-health-{uuid.uuid4().hex[:6]}"
    names.append(name)
    settings = _settings(nats_url, topology, tr_home, disk=False)
    async with running(settings) as app:
        await _running(app)
        # The shell builtin `test`; no timer (the checks are run below, one at a time).
        proc = await _sh([*prefix, "-d", "--name", name, "--health-cmd", "test -e /tmp/ok",
                          "--health-interval", "disable", "--health-retries", "1", image,
                          "/bin/sleep", "600"], env)
        assert proc.returncode == 0, proc.stderr

        async def check() -> None:
            await _sh([*base, "healthcheck", "run", name], env)
            await asyncio.sleep(0.3)  # pacing: its event on the stream before the next check

        async def checked_until(pred: Callable[[MemoryEvent], bool]) -> MemoryEvent | None:
            await check()
            return next((e for e in await reader.events() if pred(e)), None)

        # The first failing check may still count as `starting`: check until unhealthy.
        unhealthy = await wait_for(lambda: checked_until(lambda e: _of(e, name, "health")),
                                   timeout=30, interval=0, what="an unhealthy event")
        await check()  # unhealthy once more: not news
        ok = await _sh([*base, "exec", name, "/bin/sh", "-c", ": > /tmp/ok"], env)
        assert ok.returncode == 0, ok.stderr
        # podman 4.3's event carries the status of before the check: one check late.
        healthy = await wait_for(
            lambda: checked_until(lambda e: _of(e, name, "health")
                                  and "healthy again" in e.summary),
            timeout=30, interval=0, what="an event of the health check passing again")
        await check()  # healthy once more: not news
        await asyncio.sleep(1.0)  # a window for a wrong third event to arrive (none may)
        health_events = [e for e in await reader.events() if _of(e, name, "health")]
    assert unhealthy.severity == Severity.WARNING
    assert f"podman container '{name}' (image {image}) became unhealthy" in unhealthy.summary
    assert (unhealthy.metadata.model_extra or {})["health"] == "unhealthy"
    assert healthy.severity == Severity.INFO
    assert (healthy.metadata.model_extra or {})["previous_health"] == "unhealthy"
    assert len(health_events) == 2, [e.summary for e in health_events]
