"""Simulated machines on one: network namespaces on a bridge of their own (root only).

`HostNetworks(n)` makes a bridge with the address `<subnet>.1` and `n` namespaces, each with
one interface at `<subnet>.<10 + i>` on it and a loopback of its own: a process run in one
(`prefix(i)` before its argv) reaches the bridge's address and nothing of the machine's
loopback, as a process on another machine would. Everything is removed on exit.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from types import TracebackType


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


def available() -> str | None:
    """None when namespaces can be made here; else why not."""
    if os.geteuid() != 0:
        return "not root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    return None


class HostNetworks:
    def __init__(self, n: int) -> None:
        self.n = n
        tag = f"{random.randrange(16**4):04x}"
        self.bridge = f"trf{tag}br"
        self.names = [f"trf{tag}h{i}" for i in range(n)]
        self.veths = [f"trf{tag}v{i}" for i in range(n)]
        self.subnet = f"10.231.{random.randrange(1, 250)}"
        self.bridge_ip = f"{self.subnet}.1"

    def address(self, i: int) -> str:
        return f"{self.subnet}.{10 + i}"

    def prefix(self, i: int) -> list[str]:
        """What runs a command inside namespace `i`."""
        return ["ip", "netns", "exec", self.names[i]]

    def __enter__(self) -> HostNetworks:
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.bridge_ip}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i, (ns, veth) in enumerate(zip(self.names, self.veths, strict=True)):
                _ip("netns", "add", ns)
                _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("link", "set", veth, "master", self.bridge)
                _ip("link", "set", veth, "up")
                _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for ns in self.names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=20)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
