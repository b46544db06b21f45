"""Write `integrations/openclaw/openapi.json`: the recall API's OpenAPI schema, for the plugin's types.

The OpenClaw plugin's `src/api-types.ts` is generated from that file by `openapi-typescript`
(`npm run generate:api-types` in integrations/openclaw), so the plugin's view of the API comes
from the code, not from hand copies. The schema is taken from `create_app(Settings()).openapi()`:
nothing is started. `python scripts/openapi_schema.py` rewrites the file; `--check` exits 1 when
it is out of date (a unit test runs that; the plugin's `npm test` checks api-types.ts against it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from generated_file import write_or_check

OUT = Path(__file__).resolve().parent.parent / "integrations" / "openclaw" / "openapi.json"


def current() -> str:
    """The schema as the file holds it: sorted keys, two-space indents, a final newline."""
    from totalrecall_recall_api.app import create_app
    from totalrecall_recall_api.settings import Settings

    return json.dumps(create_app(Settings()).openapi(), indent=2, sort_keys=True,
                      ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_or_check(OUT, current, argv, description=__doc__,
                          regenerate="python scripts/openapi_schema.py, then npm run "
                                     "generate:api-types in integrations/openclaw")


if __name__ == "__main__":
    sys.exit(main())
