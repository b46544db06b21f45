"""The process table (psutil.process_iter): one sample per process, a zombie with its wait
status."""

from __future__ import annotations

import psutil

from ..core.process import ProcSample
from .proc_connector import zombie_exit_status


class PsutilProcessSource:
    def sample(self) -> list[ProcSample]:
        out: list[ProcSample] = []
        attrs = ["pid", "name", "cmdline", "username", "cpu_times", "memory_info",
                 "memory_percent", "create_time", "status"]
        for p in psutil.process_iter(attrs, ad_value=None):
            info = p.info
            ct = info.get("cpu_times")
            mi = info.get("memory_info")
            if info.get("create_time") is None:
                continue
            out.append(ProcSample(
                pid=info["pid"], create_time=float(info["create_time"]),
                name=info.get("name") or "?", cmdline=list(info.get("cmdline") or []),
                username=info.get("username"),
                cpu_time=(ct.user + ct.system) if ct is not None else 0.0,
                rss=mi.rss if mi is not None else 0,
                mem_percent=float(info.get("memory_percent") or 0.0),
                zombie=info.get("status") == psutil.STATUS_ZOMBIE,
                exit_status=(zombie_exit_status(info["pid"])
                             if info.get("status") == psutil.STATUS_ZOMBIE else None),
            ))
        return out
