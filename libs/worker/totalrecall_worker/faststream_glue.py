"""What a FastStream worker app needs besides the broker: a raw decoder and JSON answers."""

from __future__ import annotations

import json
from typing import Any

from faststream.asgi import AsgiResponse


async def raw_body(msg: Any) -> Any:
    """A subscriber's decoder that hands the handler the raw bytes: handlers validate payloads
    themselves (a bad payload is answered with an error or dead-lettered, not dropped by the
    framework)."""
    return msg.body


def json_response(obj: Any, status: int) -> AsgiResponse:
    """An ASGI route's JSON answer (non-JSON values such as datetimes or paths as strings)."""
    return AsgiResponse(json.dumps(obj, default=str).encode(), status_code=status,
                        headers={"content-type": "application/json"})
