from __future__ import annotations

import uvicorn

from .app import create_app
from .settings import Settings


def main() -> None:
    settings = Settings()
    uvicorn.run(create_app(settings), host=settings.http_host, port=settings.http_port,
                log_level="info", access_log=False)


if __name__ == "__main__":
    main()
