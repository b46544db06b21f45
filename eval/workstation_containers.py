"""The containers kind of the workstation set: real podman containers on this machine, seen by the
stack's containers watcher (`podman events`, `podman container inspect`, the kernel log's
oom-kill record, `podman system df`), then asked about the many ways people ask.

Made for real, each scenario twice (one container of each pair is held out, `SCENARIOS`):

* OOM-killed — a shell doubles a string in a container limited to 8 MiB (`--memory 8m`) until
  the kernel's OOM killer ends it (exit 137);
* exits non-zero — a batch job's container ends with exit code 3;
* health — a container whose health check (`test -e /tmp/ok`) is run by hand: one starts
  failing and recovers (its newest state: healthy), the other starts passing and goes bad
  (newest: unhealthy). "Is it healthy now?" must rank the newest state first;
* disk use — the watcher's `podman system df` report (the images and volumes on this machine,
  with what could be pruned).

No image is pulled: a tiny image is imported from this machine's own `/bin/sh` and `/bin/sleep`
and removed at the end, with every container made here. Where plain `podman run` fails (hybrid
cgroups, refused default rlimits), the runtime and settings that work here are used (runc,
cgroupfs, a containers.conf without default ulimits). Without a podman that runs a container
the kind is left out, said in the log (never replaced by made-up events).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

Memory = dict[str, Any]
Pred = Callable[[Memory], bool]
Log = Callable[[str], None]

PODMAN = shutil.which("podman")

#: (scenario, service word, dev?) — the held-out half of the scenario data.
SCENARIOS = [("oom", "cache", True), ("oom", "indexer", False),
             ("exit", "backup", True), ("exit", "migrate", False),
             ("recovers", "web", True), ("degrades", "api", False)]


def stack_env() -> dict[str, str]:
    """The containers watcher on podman, disk use read every 2 s and reported as soon as
    anything is reclaimable: a byte. On a podman storage that held nothing before, the eval's
    one image is in use by its containers and the exited ones hold a few dozen bytes (48 here),
    under the 1,000 bytes this threshold once was: no disk event was made, and every container
    question was left out."""
    return {"TR_WATCHERS_CONTAINERS__ENGINES": '["podman"]',
            "TR_WATCHERS_CONTAINERS__INTERVAL_S": "2",
            "TR_WATCHERS_CONTAINERS__DISK_RECLAIMABLE_GB": "0.000000001"}


class Podman:
    """How containers run on this machine, and every one made here (removed by `close`)."""

    def __init__(self, log: Log) -> None:
        assert PODMAN is not None
        self.podman: str = PODMAN
        self.log = log
        self.work = Path(tempfile.mkdtemp(prefix="tr-ws-podman-"))
        # conmon may write an `oom` file into the working directory: one of our own.
        self.env = dict(os.environ)
        self.base: list[str] = [self.podman]
        self.image = f"localhost/totalrecall-eval:{uuid.uuid4().hex[:8]}"
        self.names: list[str] = []

    def sh(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.base, *args], capture_output=True, text=True,
                              env=self.env, cwd=self.work, timeout=timeout)

    def setup(self) -> str | None:
        """Import the image and find a way to run it; None, else why containers cannot run."""
        root = self.work / "rootfs"
        (root / "bin").mkdir(parents=True)
        (root / "tmp").mkdir()
        for binary in ("sh", "sleep"):
            path = shutil.which(binary)
            if path is None:
                return f"{binary} not found: no image can be built offline"
            shutil.copy2(path, root / "bin" / binary)
            ldd = subprocess.run(["ldd", path], capture_output=True, text=True)
            for line in ldd.stdout.splitlines():
                lib = next((p for p in line.split() if p.startswith("/")), None)
                if lib:
                    (root / lib.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(lib, root / lib.lstrip("/"))
        with tarfile.open(self.work / "rootfs.tar", "w") as t:
            t.add(root, arcname=".")
        imp = self.sh("import", "-q", str(self.work / "rootfs.tar"), self.image)
        if imp.returncode != 0:
            return f"`podman import` failed: {imp.stderr.strip()[:200]}"
        if self.sh("run", "--rm", self.image, "/bin/sh", "-c", "exit 0").returncode == 0:
            return None
        conf = self.work / "containers.conf"
        conf.write_text("[containers]\ndefault_ulimits = []\n")
        self.env["CONTAINERS_CONF"] = str(conf)
        self.base = [self.podman, "--runtime", "runc", "--cgroup-manager=cgroupfs"]
        last = self.sh("run", "--rm", self.image, "/bin/sh", "-c", "exit 0")
        return None if last.returncode == 0 else \
            f"podman cannot run a container here: {last.stderr.strip()[:200]}"

    def run(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        self.names.append(name)
        return self.sh("run", "--name", name, *args)

    def close(self) -> None:
        for name in self.names:
            self.sh("rm", "-f", "-t", "0", name)
        self.sh("rmi", "-f", self.image)
        shutil.rmtree(self.work, ignore_errors=True)


def _md(m: Memory) -> dict[str, Any]:
    return m.get("metadata") or {}


def container_gold(name: str, *subcategories: str, health: str | None = None) -> Pred:
    def gold(m: Memory) -> bool:
        md = _md(m)
        return m.get("category") == "system.container" and md.get("container_name") == name \
            and m.get("subcategory") in subcategories \
            and (health is None or md.get("health") == health)
    return gold


def disk_gold() -> Pred:
    return lambda m: m.get("category") == "system.container" and m.get("subcategory") == "disk"


def make_containers(wait: Callable[[str, Pred, float], Memory], values: dict[str, Any],
                    skipped: dict[str, str], closers: list[Callable[[], None]], marker: str,
                    log: Log, timeout: float) -> None:
    """Make every scenario for real; `wait(query, gold, timeout)` until each is recallable.
    The containers and the image are removed by the closer added to `closers`, once the
    questions are asked (removing a container is an event too: "is web up now?" would be
    answered by its removal)."""
    if PODMAN is None or os.geteuid() != 0:
        skipped["containers"] = "podman is not installed" if PODMAN is None else \
            "memory limits and the kernel log need root podman"
        log(f"[workstation] containers left out: {skipped['containers']}")
        return
    pm = Podman(log)
    closers.append(pm.close)
    why = pm.setup()
    if why is not None:
        skipped["containers"] = why
        log(f"[workstation] containers left out: {why}")
        return
    made = []
    try:
        for scenario, svc, dev in SCENARIOS:
            name = f"{svc}-{marker}"
            _SCENARIO[scenario](pm, name, wait, timeout)
            made.append({"scenario": scenario, "svc": svc, "name": name, "dev": dev})
        wait("how much disk space do my containers use?", disk_gold(), timeout)
    except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
        # The other kinds are still asked; this one is left out, said in the result.
        skipped["containers"] = f"a scenario failed: {exc}"[:300]
        log(f"[workstation] containers left out: {skipped['containers']}")
        return
    values["containers"] = made
    how = "runc, cgroupfs" if len(pm.base) > 1 else "podman's defaults"
    log(f"[workstation] containers recorded (run with {how})")


def _oom(pm: Podman, name: str, wait: Callable[[str, Pred, float], Memory],
         timeout: float) -> None:
    proc = pm.run(name, "--memory", "8m", pm.image, "/bin/sh", "-c",
                  'x=aaaaaaaaaaaaaaaa; while :; do x="$x$x"; done')
    if proc.returncode != 137:
        raise RuntimeError(f"{name} was not OOM-killed (exit {proc.returncode}): "
                           f"{proc.stderr.strip()[:200]}")
    wait(f"container {name} out of memory", container_gold(name, "oom", "die"), timeout)


def _exit(pm: Podman, name: str, wait: Callable[[str, Pred, float], Memory],
          timeout: float) -> None:
    proc = pm.run(name, pm.image, "/bin/sh", "-c", "sleep 1; exit 3")
    if proc.returncode != 3:
        raise RuntimeError(f"{name} exited {proc.returncode}: {proc.stderr.strip()[:200]}")
    wait(f"container {name} died", container_gold(name, "die"), timeout)


def _health(pm: Podman, name: str, wait: Callable[[str, Pred, float], Memory], timeout: float,
            states: tuple[str, str]) -> None:
    """A container whose health goes through `states` (checks run by hand, one at a time). The
    image has no `rm`: the check passes while /tmp/ok exists and /tmp/bad does not, and each
    flip creates one of them."""
    start = ": > /tmp/ok; " if states[0] == "healthy" else ""
    proc = pm.run(name, "-d", "--health-cmd", "test -e /tmp/ok && test ! -e /tmp/bad",
                  "--health-interval", "disable", "--health-retries", "1", pm.image,
                  "/bin/sh", "-c", f"{start}exec sleep 900")
    if proc.returncode != 0:
        raise RuntimeError(f"{name} did not start: {proc.stderr.strip()[:200]}")
    for i, state in enumerate(states):
        if i:  # make the check flip
            pm.sh("exec", name, "/bin/sh", "-c",
                  ": > /tmp/ok" if state == "healthy" else ": > /tmp/bad")
        gold = container_gold(name, "health", health=state)
        deadline = time.monotonic() + timeout
        while True:  # podman 4.3's event carries the status of before the check: run until seen
            pm.sh("healthcheck", "run", name)
            try:
                wait(f"container {name} {state}", gold, 2.0)
                break
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise


_SCENARIO: dict[str, Callable[..., None]] = {
    "oom": _oom, "exit": _exit,
    "recovers": lambda pm, n, w, t: _health(pm, n, w, t, ("unhealthy", "healthy")),
    "degrades": lambda pm, n, w, t: _health(pm, n, w, t, ("healthy", "unhealthy")),
}

# --- the questions: (phrasing, gold kind) per scenario; {name} the container, {svc} its word ---
OOM_PHRASINGS = [
    "why did the {svc} container die?", "was {name} OOM-killed?", "did {name} run out of memory?",
    "what killed the {svc} container?", "why does {name} keep dying?",
    "{svc} container exited 137, why?", "did the kernel kill {name}?",
    "what happened to my {svc} container", "is the {svc} container's memory limit too low?",
    "why did podman's {svc} stop all of a sudden?", "oom in {svc}?",
    "what went wrong with {name}",
]
EXIT_PHRASINGS = [
    "did the {svc} container die?", "what exit code did {name} return?",
    "why did {name} fail?", "did the {svc} job crash?", "is the {svc} container still running?",
    "what happened to the {svc} container", "did {name} exit with an error?",
    "{svc} container failed, what status?", "why did my {svc} job stop?",
    "was there a problem with the {svc} container?", "did {name} finish ok?",
    "how did the {svc} run end?",
]
HEALTH_PHRASINGS = [
    "is {name} healthy now?", "is the {svc} container up now?", "is {svc} ok right now?",
    "what's the current health of {name}?", "is the {svc} healthcheck passing at the moment?",
    "is {svc} still unhealthy?", "how is the {svc} container doing now",
    "{svc} container status right now?", "is {name} currently failing its health check?",
    "can I trust the {svc} container now?",
]
DISK_PHRASINGS = [
    "how much disk do my containers use?", "can I prune podman images?",
    "what's taking space in container storage?", "how much could podman system prune free?",
    "are old images eating my disk?", "container images disk usage?",
    "how big are the podman images and volumes?", "what container stuff can I clean up?",
    "is there reclaimable space in podman?", "why is /var/lib/containers so big?",
]


def questions(values: dict[str, Any],
              make: Callable[[str, Pred, Pred | None, bool, str], Any]) -> list[Any]:
    """`make(text, gold, stale, scenario_dev, phrasing)` for every phrasing of each scenario."""
    qs: list[Any] = []
    for c in values.get("containers", []):
        name, svc, dev = c["name"], c["svc"], c["dev"]
        if c["scenario"] == "oom":
            gold, stale, phrasings = container_gold(name, "oom"), None, OOM_PHRASINGS
        elif c["scenario"] == "exit":
            gold, stale, phrasings = container_gold(name, "die"), None, EXIT_PHRASINGS
        else:
            now, was = ("healthy", "unhealthy") if c["scenario"] == "recovers" \
                else ("unhealthy", "healthy")
            gold = container_gold(name, "health", health=now)
            stale = container_gold(name, "health", health=was)
            phrasings = HEALTH_PHRASINGS
        qs += [make(p.format(name=name, svc=svc), gold, stale, dev, p) for p in phrasings]
    if values.get("containers"):
        qs += [make(p, disk_gold(), None, True, p) for p in DISK_PHRASINGS]
    return qs
