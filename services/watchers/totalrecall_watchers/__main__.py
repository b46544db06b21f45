"""`python -m totalrecall_watchers`: Settings() → create_app → uvicorn."""

from __future__ import annotations

import logging

import uvicorn

from .app import create_app
from .settings import Settings


def main() -> None:
    settings = Settings()
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    uvicorn.run(app, host=settings.http_host, port=settings.http_port,
                log_level=settings.log_level.lower(), access_log=False)


if __name__ == "__main__":
    main()
