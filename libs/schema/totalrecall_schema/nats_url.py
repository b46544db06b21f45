"""`NATS_URL` as nats-py and FastStream take it.

A URL, or a comma-separated list of a cluster's nodes, may carry credentials
(`nats://user:pw@n1:4222,nats://user:pw@n2:4222`, or a token: `nats://tok@n1:4222`). nats-py
uses a URL's credentials only for that URL: when the node in use dies it may reconnect to a
node the cluster announced (a URL of its own, without them) and be refused ("Authorization
Violation"), which ends the connection. So the credentials are taken out of the URLs and given
as connection options, which nats-py uses for every server.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit


def connect_options(url: str) -> dict[str, Any]:
    """`nats.connect`'s `servers` and credentials (`user`/`password`, or `token`) for `url`."""
    servers: list[str] = []
    auth: dict[str, Any] = {}
    for part in (p.strip() for p in url.split(",")):
        if not part:
            continue
        u = urlsplit(part)
        if u.username is not None:
            auth = ({"user": unquote(u.username), "password": unquote(u.password)}
                    if u.password is not None else {"token": unquote(u.username)})
            part = u._replace(netloc=u.netloc.rpartition("@")[2]).geturl()
        servers.append(part)
    return {"servers": servers, **auth}
