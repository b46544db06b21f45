"""The web page at /ui: static files shipped in the package, served as they are.

They hold no data and no secret, so they are served without the bearer token (a browser cannot
send one when it loads a page); the page asks for the token and sends it with every call to
/memory/*, which the auth middleware checks as for any other client. The Content-Security-Policy
lets the page load and call nothing but this server.
"""

from __future__ import annotations

from pathlib import Path

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

UI_DIR = Path(__file__).parent.parent / "ui"

UI_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; "
                                "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                                "form-action 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # A new version of the page is used at once after an upgrade.
    "Cache-Control": "no-cache",
}


class UiFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(UI_HEADERS)
        return response
