from __future__ import annotations

import gc
import logging
import sys

import uvicorn

from .app import create_app
from .settings import Settings

#: sysexits.h: the configuration is wrong; `totalrecall run` stops instead of restarting.
EX_CONFIG = 78


def tune_gc(threshold: int) -> None:
    """Collect rarely (`Settings.gc_threshold`), and keep the startup heap (modules, the app),
    which never becomes garbage, out of every collection."""
    if threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    gc.set_threshold(threshold, 20, 100)


def main() -> None:
    # The service's own loggers (term statistics, alerts, learning) at INFO, as in the other
    # services; uvicorn's `log_level` below sets only uvicorn's.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = Settings()
    try:
        app = create_app(settings)
    except ValueError as exc:  # e.g. a public address without TR_RECALL_API_TOKEN
        # EX_CONFIG: a supervisor does not restart it (restarting cannot fix a configuration).
        print(f"recall-api: {exc}", file=sys.stderr, flush=True)
        sys.exit(EX_CONFIG)
    tune_gc(settings.gc_threshold)
    uvicorn.run(app, host=settings.http_host, port=settings.http_port, log_level="info",
                access_log=False)


if __name__ == "__main__":
    main()
