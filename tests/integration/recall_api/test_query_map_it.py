"""The shipped question map (recall/query_map.py) on the real model: it fits the embedder's
fingerprint, and it moves real questions towards their answers and away from turns that only
echo the question, on conversations it was not learned from (written here, not LoCoMo's)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
from totalrecall_embedder.core import Engine, EngineConfig
from totalrecall_recall_api.adapters.query_map_file import load_query_map
from totalrecall_recall_api.recall.query_map import MappedQueries
from totalrecall_recall_api.settings import Settings

from tests.integration.recall_api.test_query_model_it import EngineRpc

#: (question, the turn that answers it, a turn that asks it again in other words)
CASES = [
    ("What does Priya do to relax after work?",
     "Priya: After a long shift I usually go for a run along the river and then cook something "
     "slow.", "Jo: What do you do to relax after work, Priya?"),
    ("Where did Tom go on holiday last summer?",
     "Tom: We spent two weeks hiking in the Dolomites in July, the views were unreal.",
     "Jo: Tom, where did you go on holiday last summer?"),
    ("What instrument is Alex learning?",
     "Alex: I finally booked cello lessons, my teacher says my bowing is getting better.",
     "Jo: Alex, what instrument are you learning these days?"),
    ("Why did Sam change jobs?",
     "Sam: The commute was killing me, so I took the offer from the startup near my flat.",
     "Jo: Sam, why did you change jobs?"),
    ("What pet does Nina have?",
     "Nina: My tabby cat Miso knocked the plant off the shelf again this morning.",
     "Jo: What pet do you have, Nina?"),
    ("Which city did Marco move to?",
     "Marco: The movers dropped everything at the new place in Lisbon yesterday.",
     "Jo: Which city did you move to, Marco?"),
]


def test_the_map_moves_questions_from_their_echoes_towards_their_answers(
        model_path: Path) -> None:
    engine = Engine(EngineConfig(model_path=model_path))
    assert asyncio.run(engine.load())
    query_map = load_query_map(Settings().query_map_path)
    assert query_map is not None and query_map.fits(engine.fingerprint, engine.dim)
    raw, mapped = EngineRpc(engine), MappedQueries(EngineRpc(engine), query_map)
    docs = np.asarray(engine.embed_query([t for _, a, e in CASES for t in (a, e)], kind="document"))
    answers, echoes = docs[0::2], docs[1::2]
    gaps = []
    for (q, _, _), a, e in zip(CASES, answers, echoes, strict=True):
        before = np.asarray(asyncio.run(raw.embed_query(q))[0])
        after, model = asyncio.run(mapped.embed_query(q))
        assert model == engine.fingerprint
        after = np.asarray(after)
        assert abs(float(np.linalg.norm(after)) - 1.0) < 1e-5
        # how much nearer the answer is than the echo, before and after the map
        gaps.append((float(before @ a - before @ e), float(after @ a - after @ e)))
    better = sum(1 for b, a in gaps if a > b)
    assert better >= len(CASES) - 1, gaps
    assert np.mean([a - b for b, a in gaps]) > 0.03, gaps
