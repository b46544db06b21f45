"""Who asked for a package: a real .deb built here, installed and removed by the real apt
(`apt-get install ./x.deb`, no network), and the package events on the real stream carry
apt's command line from its real history log (root with apt only; skipped elsewhere)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from totalrecall_schema import Topology
from totalrecall_watchers.settings import PackagesSettings
from watchers_it_helpers import StreamReader, make_settings, running, wait_until

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(c) for c in ("apt-get", "dpkg-deb", "dpkg"))
    or not Path("/var/log/apt/history.log").exists(),
    reason="needs root, apt-get, dpkg-deb and apt's history log")


def _deb(tmp: Path, name: str) -> Path:
    root = tmp / name
    (root / "DEBIAN").mkdir(parents=True)
    (root / "usr/share/doc" / name).mkdir(parents=True)
    (root / "usr/share/doc" / name / "README").write_text("a package of the tests\n")
    (root / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: 1.0-1\nArchitecture: all\nMaintainer: tests <t@example.org>\n"
        "Description: a package of the tests\n")
    out = tmp / f"{name}_1.0-1_all.deb"
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(out)],
                   check=True, capture_output=True)
    return out


async def test_an_apt_install_says_which_command_asked(
        nats_url: str, topology: Topology, tr_home: Path, tmp_path: Path,
        reader: StreamReader) -> None:
    name = f"tr-asked-{uuid.uuid4().hex[:6]}"
    deb = _deb(tmp_path, name)
    settings = make_settings(nats_url, topology, tr_home, enable=("packages",))
    settings.packages = PackagesSettings(interval_s=0.3, pip=False, npm=False,
                                         state_file=str(tr_home / "packages.json"))
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        async with running(settings) as app:
            status = app.state.runner.status["packages"]
            await wait_until(lambda: status.last_poll_at is not None, 30, "the first poll")
            subprocess.run(["apt-get", "install", "-y", str(deb)], check=True,
                           capture_output=True, env=env, timeout=120)
            ev, _ = await reader.wait_for(
                lambda e: e.category == "system.package" and e.subcategory == "install"
                and e.metadata.model_dump().get("package") == name, 60, "the install")
            subprocess.run(["apt-get", "remove", "-y", name], check=True, capture_output=True,
                           env=env, timeout=120)
            gone, _ = await reader.wait_for(
                lambda e: e.category == "system.package" and e.subcategory == "remove"
                and e.metadata.model_dump().get("package") == name, 60, "the removal")
    finally:
        subprocess.run(["dpkg", "--purge", name], capture_output=True, env=env)
    md = ev.metadata.model_dump()
    assert md["command"].startswith("apt-get install -y") and name in md["command"]
    assert f"(by `apt-get install -y {deb}`" in ev.summary
    assert "command: apt-get install" in ev.detail
    assert gone.metadata.model_dump()["command"] == f"apt-get remove -y {name}"
