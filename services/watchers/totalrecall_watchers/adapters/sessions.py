"""Who is logged in (psutil.users: utmp)."""

from __future__ import annotations

import psutil

from ..core.sessions import Session


def psutil_sessions() -> list[Session]:
    return [(u.name, u.terminal or "", u.host or "", float(u.started)) for u in psutil.users()]
