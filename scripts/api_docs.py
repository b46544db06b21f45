"""Write `docs/api.md`: the recall API's endpoints as its OpenAPI schema describes them.

`python scripts/api_docs.py` rewrites the file; `--check` exits 1 when it is out of date (a test
runs that, so the page cannot drift from the code). The contract's prose (the block, namespaces,
the plugin's use of it) is `docs/agents.md`; this page is the list of what exists.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from generated_file import write_or_check

DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"

HEADER = """# The recall API

Generated from the recall API's OpenAPI schema by `python scripts/api_docs.py` (do not edit: a
test fails when this page and the code differ). A running API serves the same schema at
`/openapi.json` and an interactive page at `/docs`. How agents use it (the `<system_memory>`
block, namespaces, the OpenClaw plugin and the MCP server): `docs/agents.md`.

Every `/memory/*` call needs `Authorization: Bearer $TR_RECALL_API_TOKEN` when a token is set (the
API refuses to listen off loopback without one). A bad request gets a 4xx whose `detail` says why.

"""


def _ref(schema: dict[str, Any]) -> str:
    """A short name for a schema: its model's name, or its type."""
    if "$ref" in schema:
        return f"`{schema['$ref'].rsplit('/', 1)[-1]}`"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(_ref(s) for s in schema[key])
    if schema.get("type") == "array":
        return f"list of {_ref(schema.get('items', {}))}"
    return f"`{schema.get('type', 'any')}`"


def _body(op: dict[str, Any]) -> str:
    content = op.get("requestBody", {}).get("content", {})
    return " or ".join(_ref(c.get("schema", {})) for c in content.values()) or "—"


def _answer(op: dict[str, Any]) -> str:
    ok = op.get("responses", {}).get("200", {}).get("content", {})
    return " or ".join(f"{_ref(c.get('schema', {}))} ({kind})" if kind != "application/json"
                       else _ref(c.get("schema", {})) for kind, c in ok.items()) or "—"


def _params(op: dict[str, Any]) -> str:
    return ", ".join(f"`{p['name']}`" for p in op.get("parameters", [])) or "—"


def _summary(op: dict[str, Any]) -> str:
    text = (op.get("description") or op.get("summary") or "").strip()
    return " ".join(text.split("\n\n", 1)[0].split()).replace("|", "\\|")


def render(schema: dict[str, Any]) -> str:
    rows = ["| method | path | query | body | answer | what it does |",
            "|---|---|---|---|---|---|"]
    for path, ops in sorted(schema["paths"].items()):
        for method, op in sorted(ops.items()):
            rows.append(f"| {method.upper()} | `{path}` | {_params(op)} | {_body(op)} | "
                        f"{_answer(op)} | {_summary(op)} |")
    models = sorted(schema.get("components", {}).get("schemas", {}).items())
    fields = ["", "## Models", ""]
    for name, model in models:
        props = model.get("properties", {})
        if not props:
            continue
        required = set(model.get("required", []))
        fields.append(f"- `{name}`: " + ", ".join(
            f"`{k}`{'' if k in required else '?'}" for k in props))
    return HEADER + "## Endpoints\n\n" + "\n".join(rows) + "\n" + "\n".join(fields) + "\n"


def current() -> str:
    from totalrecall_recall_api.app import create_app
    from totalrecall_recall_api.settings import Settings

    return render(create_app(Settings()).openapi())


def main(argv: list[str] | None = None) -> int:
    return write_or_check(DOC, current, argv, description=__doc__,
                          regenerate="python scripts/api_docs.py")


if __name__ == "__main__":
    sys.exit(main())
