"""Query words as Postgres full-text operands, and the SQL that turns a text into the lexemes
the indexer stores."""

from __future__ import annotations

from ..core.term_weights import is_prefix


def quote(lexeme: str) -> str:
    """A lexeme as a tsquery operand (quoted, so `&|!:*()` in it mean nothing)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


#: Query words at least this long also match as prefixes: the english parser keeps
#: `nginx.service`, `python3.11` or `docker-compose.yml` as single lexemes, so "why did nginx
#: fail" would otherwise never reach "nginx.service failed".
PREFIX_MIN_CHARS = 4


def operand(lexeme: str, prefix_min_chars: int = PREFIX_MIN_CHARS) -> str:
    quoted = quote(lexeme)
    return f"{quoted}:*" if is_prefix(lexeme, prefix_min_chars) else quoted


WORD_LEXEMES_SQL = ("SELECT lexeme, positions FROM unnest(to_tsvector('english', $1)) "
                    "ORDER BY positions[1]")
#: The words as the english parser stores them, then the identifiers as the indexer's
#: `tr_identifiers` (its migration 6) adds them to every memory's tsv: one definition for both.
LEXEMES_SQL = f"""SELECT lexeme, positions FROM ({WORD_LEXEMES_SQL}) AS w
                  UNION ALL SELECT unnest(tr_identifiers($1)), NULL::smallint[]"""
