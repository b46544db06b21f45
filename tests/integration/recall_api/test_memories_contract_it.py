"""The `memories` table's contract (`totalrecall_schema.memories_table`) against the table the
indexer's migrations make on a real Postgres, and against the SQL recall-api reads it with."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import asyncpg
from totalrecall_indexer.adapters.pg_schema import migrate
from totalrecall_schema.memories_table import COLUMN_NAMES, COLUMNS, TABLE, MemoriesTable

RECALL_API = Path(__file__).resolve().parents[3] / "services/recall-api/totalrecall_recall_api"

#: A string literal is SQL when it has one of these (the code writes SQL words in capitals).
_SQL_RE = re.compile(r"\b(SELECT|FROM|WHERE|JOIN|ORDER BY|GROUP BY|UPDATE|INSERT INTO)\b")
#: Lower-case words of recall-api's SQL that are not columns: table aliases, CTE and output
#: names, and the indexer's SQL functions called without parentheses after them.
_NOT_COLUMNS = frozenset({
    "memories", "m", "g", "h", "i", "l", "n", "q", "r", "s", "t", "u", "w", "ns", "hit", "known",
    "last", "newest", "oldest", "exact", "prefix", "rank", "cap", "gap", "units", "scope",
    "lexemes", "positions", "n_all", "n_ns", "fits", "interval", "term_stats", "namespace_stats"})


async def _table_columns(conn: asyncpg.Connection, table: str) -> dict[str, tuple[str, bool]]:
    rows = await conn.fetch(
        """SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull
           FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0
                AND NOT a.attisdropped ORDER BY a.attnum""", table)
    return {r["attname"]: (r["type"], not r["attnotnull"]) for r in rows}


async def test_every_column_of_the_read_model_is_in_the_table_as_declared(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await migrate(conn)
        table = await _table_columns(conn, TABLE)
    finally:
        await conn.close()
    declared = {c.name: (c.type, c.nullable) for c in COLUMNS}
    # Nullability: a column declared NOT NULL must be; one declared nullable may be either
    # (a generated column or a trigger's reads as nullable to Postgres).
    for name, (type_, nullable) in declared.items():
        assert name in table, f"memories.{name} is in the read model, not in the table"
        assert table[name][0] == type_, f"memories.{name}: {table[name][0]}, declared {type_}"
        assert nullable or not table[name][1], f"memories.{name} may be NULL, declared NOT NULL"
    undocumented = sorted(set(table) - set(declared))
    assert not undocumented, f"columns of memories not in the read model: {undocumented}"


def _sql_words() -> dict[str, set[str]]:
    """Every lower-case word of every SQL string literal of recall-api -> the files using it
    (quoted SQL strings, `$n` parameters and their casts left out)."""
    words: dict[str, set[str]] = {}
    for path in sorted(RECALL_API.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and _SQL_RE.search(node.value)):
                continue
            text = re.sub(r"'[^']*'", " ", node.value)
            text = re.sub(r"::\w+(\[\])?", " ", text)  # casts name types, not columns
            text = re.sub(r"\b[a-z_]\w*\s*\(", " ", text)  # function calls
            for word in re.findall(r"\b[a-z_][a-z0-9_]*\b", text):
                words.setdefault(word, set()).add(path.name)
    return words


async def test_every_column_recall_api_reads_is_in_the_read_model(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await migrate(conn)
        # The other tables recall-api reads (the term statistics): their own columns.
        others = {name for t in ("term_stats", "namespace_stats")
                  for name in await _table_columns(conn, t)} - COLUMN_NAMES
    finally:
        await conn.close()
    words = _sql_words()
    # The extraction finds the columns recall-api is known to read (else this test proves
    # nothing): its select list, and the generated ones it filters by.
    assert {MemoriesTable.thread.name, MemoriesTable.host.name, MemoriesTable.template.name,
            MemoriesTable.tsv.name, MemoriesTable.superseded_by.name,
            MemoriesTable.last_seen.name} <= set(words)
    unknown = {w: sorted(files) for w, files in words.items()
               if w not in COLUMN_NAMES and w not in others and w not in _NOT_COLUMNS}
    assert not unknown, ("recall-api's SQL names columns the memories read model does not "
                         f"declare (add them to totalrecall_schema.memories_table): {unknown}")
