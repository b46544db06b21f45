"""`docs/architecture.md` is the contract agents, the plugin and other machines rely on: its routes
and its NATS names are checked against the code, both ways (a name in the doc the code does not
have is as wrong as a route the doc forgets)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.routing import APIRoute
from totalrecall_schema.topology import Topology

DOC = Path(__file__).resolve().parents[3] / "docs" / "architecture.md"
#: `POST /memory/recall`, `GET /memory/export?namespace=` (backticked: the prose's arrows are not
#: claims about routes)
_ROUTE = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/[A-Za-z0-9_/{}.-]*)")
#: a backticked NATS name of ours: `memory.events.<category>`, `memory.rpc.`
_SUBJECT = re.compile(r"`(memory\.[^`\s]*)`")
_STREAM = re.compile(r"`(MEMORY_[A-Z_]+)`")
#: FastAPI's own pages, not routes of ours
_FRAMEWORK = {"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _code_routes() -> set[tuple[str, str]]:
    from totalrecall_recall_api.app import create_app
    from totalrecall_recall_api.settings import Settings

    app = create_app(Settings())
    routes = {(m.upper(), path) for path, ops in app.openapi()["paths"].items() for m in ops}
    for r in app.routes:  # those left out of the schema (/metrics)
        if isinstance(r, APIRoute):
            routes |= {(m, r.path) for m in r.methods if m != "HEAD"}
    return {(m, p) for m, p in routes if p not in _FRAMEWORK}


def test_every_route_of_the_recall_api_is_in_the_contract_and_no_other(doc: str) -> None:
    code = _code_routes()
    documented = {(m, p) for m, p in _ROUTE.findall(doc)}
    assert code - documented == set(), "routes the doc does not describe"
    assert documented - code == set(), "routes the doc names that the API does not have"


def _topology() -> Topology:
    return Topology(partitions=2)


def _nats_match(pattern: str, subject: str) -> bool:
    p, s = pattern.split("."), subject.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(p) == len(s)


def test_every_stream_bucket_and_rpc_subject_is_named_in_the_doc(doc: str) -> None:
    t = _topology()
    names = [t.events_stream, t.embedded_stream, t.dlq_stream, t.partition_owners_bucket,
             t.rpc_embed_query, t.rpc_embed_batch, t.rpc_vector_search, t.rpc_index_admin,
             t.rpc_index_progress, t.events_all, t.host_events_all, t.embedded_all, t.dlq_all,
             *t.embedded_subjects, t.embedder_durable, t.indexer_durable]
    for name in names:
        assert f"`{name}`" in doc or f"durable `{name}`" in doc, name
    # the per-partition names, with the doc's placeholder for the number
    assert t.indexer_durable_of(1).replace("1", "<p>") in doc
    assert t.embedded_root(1).replace(".1.", ".<p>.") in doc


def test_every_nats_name_in_the_doc_is_one_the_code_makes(doc: str) -> None:
    t = _topology()
    filters = [*t.event_subjects, *t.embedded_subjects, t.dlq_all]
    rpcs = [t.rpc_embed_query, t.rpc_embed_batch, t.rpc_vector_search, t.rpc_index_admin,
            t.rpc_index_progress]
    streams = {t.events_stream, t.embedded_stream, t.dlq_stream, t.partition_owners_bucket}
    subjects = _SUBJECT.findall(doc)
    assert len(subjects) >= 10  # the parser still finds the doc's names
    for name in subjects:
        if name.endswith("."):  # "under `memory.rpc.`": a prefix of real subjects
            assert any(r.startswith(name) for r in rpcs), name
            continue
        if "*" in name or name.endswith(">"):
            concrete = re.sub(r"<[^>]+>", "x1", name)
            assert concrete in filters or any(_nats_match(f, concrete.replace("*", "x1")
                                                          .replace(">", "x1"))
                                              for f in filters), name
            continue
        concrete = re.sub(r"<[^>]+>", "x1", name)
        assert concrete in rpcs or any(_nats_match(f, concrete) for f in filters), name
    for stream in _STREAM.findall(doc):
        assert stream in streams, stream


def test_the_doc_names_every_category_of_the_taxonomy(doc: str) -> None:
    from totalrecall_schema.taxonomy import CATEGORIES

    listed = doc.split("Event categories", 1)[1].split("\n\n", 1)[0]
    for category in CATEGORIES:
        assert re.search(rf"(?<![\w.]){re.escape(category)}(?![\w])", listed), category
