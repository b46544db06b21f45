"""The `memories` read model documents every column: its docstring says what it holds and who
writes it. (Its agreement with the real table and recall-api's SQL:
tests/integration/recall_api/test_memories_contract_it.py.)"""

from __future__ import annotations

import ast
import inspect

from totalrecall_schema import memories_table
from totalrecall_schema.memories_table import COLUMNS, MEMORY_ROW, MemoriesTable, select_list


def _docstrings() -> dict[str, str]:
    body = ast.parse(inspect.getsource(MemoriesTable)).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for stmt, after in zip(body.body, body.body[1:], strict=False):
        if (isinstance(stmt, ast.Assign) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            target = stmt.targets[0]
            assert isinstance(target, ast.Name)
            docs[target.id] = after.value.value
    return docs


def test_every_column_has_a_docstring_with_its_writer() -> None:
    docs = _docstrings()
    for col in COLUMNS:
        assert getattr(MemoriesTable, col.name) is col  # the attribute is named as the column
        doc = docs.get(col.name, "")
        assert "indexer" in doc.lower() or "Postgres" in doc, f"{col.name}: who writes it?"
        short = {"timestamp with time zone": "timestamptz"}.get(col.type, col.type)
        assert doc.startswith(short), f"{col.name}: its docstring starts with its type"


def test_select_lists() -> None:
    assert select_list(MEMORY_ROW) == ("key, id, namespace, ts, category, subcategory, actor, "
                                       "severity, tags, summary, detail, metadata, tier, "
                                       "superseded_by")
    assert select_list(MEMORY_ROW[:2], "m") == "m.key, m.id"
    assert memories_table.TABLE == "memories"
    assert len({c.name for c in COLUMNS}) == len(COLUMNS) == 27
