from __future__ import annotations

import uvicorn

from .app import create_app
from .settings import Settings


def main() -> None:
    settings = Settings()
    try:
        app = create_app(settings)
    except ValueError as exc:  # e.g. a public address without TR_RECALL_API_TOKEN
        raise SystemExit(f"recall-api: {exc}") from None
    uvicorn.run(app, host=settings.http_host, port=settings.http_port, log_level="info",
                access_log=False)


if __name__ == "__main__":
    main()
