"""The users database (`pwd`: /etc/passwd, or NSS): a uid's name."""

from __future__ import annotations

import pwd


def uid_name(uid: str | None) -> str | None:
    """The name of a numeric uid (`uid N` when unknown); None when it is not one."""
    if not uid or not uid.isdigit() or int(uid) >= 4294967295:
        return None
    try:
        return pwd.getpwuid(int(uid)).pw_name
    except KeyError:
        return f"uid {uid}"
