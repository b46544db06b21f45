"""What every system of `make bench-peers` is given and asked: the eval's own data, loaded by the
eval's own loaders, so that the peers answer the same questions against the same gold.

- quality: each LoCoMo dev conversation and each LogQA system in its own namespace (as `make eval`
  loads them), every question asked there;
- latency: one namespace of `n` memories (20k): every LoCoMo turn and LogQA line again, then
  LongMemEval-S dev turns of at most `FILLER_MAX_CHARS` characters as filler, asked the LoCoMo and
  LogQA questions (distinct texts, so no query cache answers twice).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from eval.datasets import load, load_longmemeval
from eval.logqa import load_logqa

#: Filler turns longer than this are skipped (every system truncates long texts differently; the
#: latency corpus should measure search, not truncation).
FILLER_MAX_CHARS = 600


class Item(Protocol):
    """A LoCoMo/LongMemEval `Turn` or a LogQA `LogLine`."""

    @property
    def id(self) -> str: ...
    @property
    def timestamp(self) -> datetime: ...
    def to_ingest(self, namespace: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Doc:
    """One memory: `id` (unique in its namespace), its text, its time, and the eval's ingest
    event of it (what Total Recall is given; the peers get the text and the time)."""
    id: str
    text: str
    ts: datetime
    item: Any

    @property
    def session(self) -> str:
        """What `eval.client.make_id_resolver` also keys a memory by."""
        return str(getattr(self.item, "session", ""))

    @property
    def index(self) -> int:
        return int(getattr(self.item, "index", -1))

    def event(self, namespace: str) -> dict[str, Any]:
        ev = dict(self.item.to_ingest(namespace))
        ev["id"] = self.id
        return ev

    def bare_event(self, namespace: str) -> dict[str, Any]:
        """What the peers get, as an ingest event: the text and the time, nothing else (no
        actor, category, source, session or turn)."""
        from totalrecall.importers.base import split_summary_detail

        summary, detail = split_summary_detail(self.text)
        ev: dict[str, Any] = {"id": self.id, "namespace": namespace, "summary": summary,
                              "timestamp": self.ts.isoformat()}
        if detail:
            ev["detail"] = detail
        return ev


@dataclass(frozen=True)
class Query:
    qid: str
    category: str
    text: str
    gold: frozenset[str]


@dataclass
class Corpus:
    """One namespace: its memories and the questions asked there."""
    key: str                      # "locomo/conv-26", "logqa/HDFS", "latency"
    dataset: str                  # "locomo" | "logqa" | "latency"
    docs: list[Doc]
    queries: list[Query] = field(default_factory=list)


def _turn_text(item: Any) -> str:
    return str(getattr(item, "full_text", None) or item.text)


def quality_corpora(data_dir: Path | None = None, *, conversations: int | None = None,
                    logqa_questions: int | None = None,
                    logqa_systems: Sequence[str] | None = None) -> list[Corpus]:
    """LoCoMo dev (`conversations`: only the first N) and LogQA (`logqa_questions`: only the
    first N of each system; `logqa_systems`: only these), each haystack its own corpus."""
    out: list[Corpus] = []
    for h in load("locomo", limit=conversations, data_dir=data_dir):
        docs = [Doc(t.id, t.full_text, t.timestamp, t) for t in h.unique_turns()]
        qs = [Query(q.qid, q.category, q.question, q.gold) for q in h.questions]
        out.append(Corpus(f"locomo/{h.key}", "locomo", docs, qs))
    for s in load_logqa(data_dir):
        if logqa_systems is not None and s.name not in logqa_systems:
            continue
        docs = [Doc(ln.id, ln.text, ln.timestamp, ln) for ln in s.lines]
        questions = s.questions[:logqa_questions] if logqa_questions else s.questions
        qs = [Query(q.qid, q.category, q.question, q.gold) for q in questions]
        out.append(Corpus(f"logqa/{s.name}", "logqa", docs, qs))
    return out


def _filler(data_dir: Path | None) -> Iterator[Doc]:
    path = (data_dir / "longmemeval" / "longmemeval_s_dev.jsonl.gz") if data_dir else None
    seen: set[str] = set()
    for h in load_longmemeval(path):
        for t in h.unique_turns():
            if len(t.full_text) > FILLER_MAX_CHARS or t.id in seen:
                continue
            seen.add(t.id)
            yield Doc(f"lme/{t.id}", t.full_text, t.timestamp, t)


def latency_corpus(quality: Sequence[Corpus], n: int, n_queries: int,
                   data_dir: Path | None = None, seed: int = 23) -> Corpus:
    """`n` memories: the quality corpora's (ids prefixed by their corpus), then filler; the
    questions: `n_queries` distinct question texts of the quality corpora, shuffled by `seed`."""
    docs: list[Doc] = []
    for c in quality:
        docs += [Doc(f"{c.key}/{d.id}", d.text, d.ts, d.item) for d in c.docs]
    docs = docs[:n]
    if len(docs) < n:
        for d in _filler(data_dir):
            docs.append(d)
            if len(docs) >= n:
                break
    texts = sorted({q.text for c in quality for q in c.queries})
    random.Random(seed).shuffle(texts)
    queries = [Query(f"latency#{i}", "latency", t, frozenset()) for i, t in
               enumerate(texts[:n_queries])]
    return Corpus("latency", "latency", docs, queries)


def namespace(tag: str, key: str) -> str:
    """A namespace every system accepts (letters, digits, `-`, `.`, `_`)."""
    from eval.datasets import namespace_for

    return namespace_for(tag, key.replace("/", "-"))


@dataclass(frozen=True)
class ProbeItem:
    """A memory written once the store is full, to time write → searchable."""
    id: str
    text: str
    timestamp: datetime
    session: str = "probe"
    index: int = -1

    def to_ingest(self, namespace: str) -> dict[str, Any]:
        return {"id": self.id, "namespace": namespace, "summary": self.text,
                "category": "system.service", "source": "bench",
                "timestamp": self.timestamp.isoformat()}


def probe(i: int, now: datetime, seed: int = 23) -> Doc:
    """A memory no other shares a word with: `probe-…` plus made-up words."""
    rng = random.Random(seed * 1000 + i)
    word = "".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(4))
    text = f"Probe {i}: the {word} relay on rack {word[:3]}{i} tripped at {now:%H:%M:%S}"
    item = ProbeItem(f"probe-{i}-{word}", text, now)
    return Doc(item.id, text, now, item)
