"""The package watcher on its real sources: a copy of this machine's dpkg log with real-format
operations appended (through the running watchers app into JetStream), a real pip virtualenv
(a wheel built here, installed, upgraded, removed by pip without network), and a real npm global
prefix (a local tarball installed, upgraded, uninstalled by npm)."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from totalrecall_schema import MemoryEvent, Topology
from totalrecall_watchers.adapters.packages import PackagesWatcher
from totalrecall_watchers.core.base import EventContext
from totalrecall_watchers.settings import PackagesSettings
from watchers_it_helpers import StreamReader, make_settings, running, wait_until

REAL_DPKG_LOG = Path("/var/log/dpkg.log")
OPERATIONS = """\
{t} install tr-pkgtest-tool:amd64 <none> 2.4.1-1
{t} status half-installed tr-pkgtest-tool:amd64 2.4.1-1
{t} status unpacked tr-pkgtest-tool:amd64 2.4.1-1
{t} configure tr-pkgtest-tool:amd64 2.4.1-1 <none>
{t} status half-configured tr-pkgtest-tool:amd64 2.4.1-1
{t} status installed tr-pkgtest-tool:amd64 2.4.1-1
{t} upgrade tr-pkgtest-lib:amd64 1.0-1 1.1-1
{t} status half-configured tr-pkgtest-lib:amd64 1.0-1
{t} status unpacked tr-pkgtest-lib:amd64 1.1-1
{t} status installed tr-pkgtest-lib:amd64 1.1-1
{t} remove tr-pkgtest-old:amd64 0.9-2 <none>
{t} status half-installed tr-pkgtest-old:amd64 0.9-2
{t} status config-files tr-pkgtest-old:amd64 0.9-2
"""


def package_events(events: list[MemoryEvent]) -> list[tuple[str, str, str | None, str | None]]:
    out = []
    for e in events:
        m = e.metadata.model_dump()
        if e.category == "system.package":
            out.append((e.subcategory, m["package"], m.get("version"), m.get("old_version")))
    return out


async def test_dpkg_log_operations_reach_jetstream(nats_url: str, topology: Topology,
                                                    tr_home: Path, tmp_path: Path,
                                                    reader: StreamReader) -> None:
    log = tmp_path / "dpkg.log"
    if REAL_DPKG_LOG.is_file():  # this machine's real history: must not be replayed
        shutil.copyfile(REAL_DPKG_LOG, log)
    else:
        log.write_text("")
    settings = make_settings(nats_url, topology, tr_home, enable=("packages",))
    settings.packages = PackagesSettings(interval_s=0.2, dpkg_log=str(log), pip=False, npm=False,
                                         apt_history=str(tmp_path / "apt-history.log"),
                                         state_file=str(tr_home / "packages.json"))
    async with running(settings) as app:
        status = app.state.runner.status["packages"]
        await wait_until(lambda: status.last_poll_at is not None, 30, "the first poll")
        with log.open("a") as f:
            f.write(OPERATIONS.format(t="2026-11-25 11:30:00"))
        await reader.wait_for(lambda e: e.metadata.model_dump().get("package")
                              == "tr-pkgtest-old", 30, "the remove event")
        events = await reader.events()
    assert package_events(events) == [("install", "tr-pkgtest-tool", "2.4.1-1", None),
                                      ("upgrade", "tr-pkgtest-lib", "1.1-1", "1.0-1"),
                                      ("remove", "tr-pkgtest-old", None, "0.9-2")]
    assert events[1].summary == "apt/dpkg: upgraded tr-pkgtest-lib 1.0-1 → 1.1-1"
    assert all(e.source == "watcher.packages" for e in events)


def build_wheel(out: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel, written by hand (no build backend, no network)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'__version__ = "{version}"\n',
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    wheel = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
        z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return wheel


def watcher(tmp_path: Path, **kw: object) -> PackagesWatcher:
    settings = PackagesSettings(dpkg=False, **kw)
    return PackagesWatcher(EventContext(hostname="box"), settings, tmp_path / "state.json")


def test_pip_install_upgrade_remove_in_a_real_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")

    def pip(*args: str) -> None:
        subprocess.run([sys.executable, "-m", "pip", "--python", py, "--disable-pip-version-check",
                        *args], check=True, capture_output=True)

    w = watcher(tmp_path, pip_environments=[str(venv)], npm=False)
    assert w.check_available() is None and "pip" in (w.note or "")
    assert w.poll() == []  # the baseline
    pip("install", "--no-index", "--no-deps", str(build_wheel(tmp_path, "trpkgtest", "1.0")))
    (installed,) = w.poll()
    pip("install", "--no-index", "--no-deps", str(build_wheel(tmp_path, "trpkgtest", "1.2")))
    (upgraded,) = w.poll()
    pip("uninstall", "-y", "trpkgtest")
    (removed,) = w.poll()
    assert package_events([installed, upgraded, removed]) == [
        ("install", "trpkgtest", "1.0", None), ("upgrade", "trpkgtest", "1.2", "1.0"),
        ("remove", "trpkgtest", None, "1.2")]
    assert upgraded.summary == f"pip in {venv}: upgraded trpkgtest 1.0 → 1.2"
    assert w.poll() == []


def npm_package(root: Path, version: str) -> Path:
    src = root / f"src-{version}"
    src.mkdir()
    (src / "package.json").write_text(json.dumps({"name": "tr-pkgtest", "version": version,
                                                  "main": "index.js"}))
    (src / "index.js").write_text("module.exports = 1;\n")
    out = subprocess.run(["npm", "pack", "--silent", "--pack-destination", str(root), str(src)],
                         capture_output=True, text=True, check=True, cwd=root)
    return root / out.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_npm_global_install_upgrade_remove_in_a_real_prefix(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    common = ["--prefix", str(prefix), "--offline", "--no-audit", "--no-fund"]

    def npm(*args: str) -> None:
        subprocess.run(["npm", *args, *common], check=True, capture_output=True, cwd=tmp_path)

    w = watcher(tmp_path, pip=False, npm_command=[
        "npm", "ls", "-g", "--json", "--depth=0", "--prefix", str(prefix)])
    assert w.poll() == []
    npm("install", "-g", str(npm_package(tmp_path, "1.0.0")))
    (installed,) = w.poll()
    npm("install", "-g", str(npm_package(tmp_path, "1.1.0")))
    (upgraded,) = w.poll()
    npm("uninstall", "-g", "tr-pkgtest")
    (removed,) = w.poll()
    assert package_events([installed, upgraded, removed]) == [
        ("install", "tr-pkgtest", "1.0.0", None), ("upgrade", "tr-pkgtest", "1.1.0", "1.0.0"),
        ("remove", "tr-pkgtest", None, "1.1.0")]
    assert installed.summary == "npm (global): installed tr-pkgtest 1.0.0"


def test_npm_absent_is_skipped_cleanly(tmp_path: Path) -> None:
    w = watcher(tmp_path, pip=False, npm_command=["tr-no-such-npm", "ls"])
    assert "no package source" in (w.check_available() or "")
    assert w.poll() == []
