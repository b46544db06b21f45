"""`python -m totalrecall_embedder`: run the embedder service."""

from __future__ import annotations

import logging

import uvicorn
from totalrecall_worker import exit_process

from .app import create_app
from .settings import Settings


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = Settings()
    app = create_app(settings, on_start_failure=exit_process)
    uvicorn.run(app, host=settings.http_host, port=settings.http_port, log_level="info")


if __name__ == "__main__":
    main()
