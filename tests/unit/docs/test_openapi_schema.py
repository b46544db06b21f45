"""The plugin's `openapi.json` is the recall API's schema (regenerate: scripts/openapi_schema.py).

The plugin's `npm test` checks the other half: `src/api-types.ts` is what `openapi-typescript`
makes of that file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType


def test_plugin_openapi_json_matches_the_code(script: Callable[[str], ModuleType]) -> None:
    assert script("openapi_schema").main(["--check"]) == 0, "run: python scripts/openapi_schema.py"


def test_the_schema_names_what_the_plugin_uses(script: Callable[[str], ModuleType]) -> None:
    schema = json.loads(script("openapi_schema").current())
    for path in ("/memory/recall", "/memory/store", "/memory/forget", "/memory/alerts",
                 "/memory/supersede", "/memory/warm", "/memory/flush", "/memory/session/end"):
        assert path in schema["paths"], path
    for model in ("RecallResponse", "Memory", "IngestResponse", "ForgetResponse", "Alert"):
        assert model in schema["components"]["schemas"], model
