"""The mounted filesystems' space and inodes (psutil's partitions and disk usage, statvfs)."""

from __future__ import annotations

import os

import psutil

from ..core.storage import Usage

#: Pseudo and container filesystems that are never interesting.
SKIP_FSTYPES = {"proc", "sysfs", "devtmpfs", "devpts", "tmpfs", "cgroup", "cgroup2", "overlay",
                "squashfs", "nsfs", "tracefs", "debugfs", "securityfs", "pstore", "bpf",
                "autofs", "mqueue", "hugetlbfs", "fusectl", "configfs", "binfmt_misc", "ramfs",
                "efivarfs", "rpc_pipefs", "nfsd"}


class PsutilStorage:
    def __init__(self, paths: list[str], include_partitions: bool = True) -> None:
        self.paths = paths
        self.include_partitions = include_partitions

    def usage(self) -> list[Usage]:
        targets: list[tuple[str, str, str]] = []
        if self.include_partitions:
            for p in psutil.disk_partitions(all=False):
                if p.fstype not in SKIP_FSTYPES and not p.mountpoint.startswith(("/proc", "/sys")):
                    targets.append((p.mountpoint, p.device, p.fstype))
        targets += [(p, "", "") for p in self.paths]
        out: list[Usage] = []
        seen_dev: set[int] = set()
        for mount, device, fstype in targets:
            try:
                st = os.stat(mount)
                if st.st_dev in seen_dev:
                    continue
                seen_dev.add(st.st_dev)
                du = psutil.disk_usage(mount)
                vfs = os.statvfs(mount)
            except OSError:
                continue
            pct = 100.0 * du.used / (du.used + du.free) if du.used + du.free > 0 else 0.0
            out.append(Usage(mount, device, fstype, du.total, du.used, du.free, pct,
                             vfs.f_files, vfs.f_ffree))
        return out
