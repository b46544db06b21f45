"""The floor of a recall: llama.cpp alone embedding the same questions, in this process, on the
same machine and in the same run as the recall figures it divides.

`embedding_floor(texts)` embeds each text once with 1 and with 2 threads (after a warm-up) and
keeps, per statistic, the better of the two (`floor_samples` and `pooled_floor`: the same over
rounds interleaved with the recalls): what the hardware needs to embed the question at
all. What is embedded is what a recall embeds of the text: the query prefix and the end of a long
prompt that fits the query's token limit (`query_input`, with the embedder's settings as the
recall API reads them), not the whole prompt, which costs more than a recall ever spends on it.
`ratio_lines` prints recall ÷ floor beside the targets; `floor_ratios` gives the same
machine-readably.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.ratios import Ratio


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


@dataclass(frozen=True)
class Floor:
    p50: float
    p99: float
    per_threads: dict[int, tuple[float, float]]  # threads -> (p50, p99)

    def describe(self) -> str:
        each = ", ".join(f"{t} thread{'s' if t > 1 else ''} p50 {a:.1f} / p99 {b:.1f} ms"
                         for t, (a, b) in sorted(self.per_threads.items()))
        return f"p50 {self.p50:.1f} ms, p99 {self.p99:.1f} ms (best of: {each})"


def floor_samples(texts: Sequence[str], model_path: Path | None = None,
                  threads: Sequence[int] = (1, 2)) -> dict[int, list[float]]:
    """Per thread count, the latency (ms) of embedding each of `texts` alone, after a warm-up
    on the first five: what `embedding_floor` summarises, and what rounds interleaved with the
    recalls they divide pool (`pooled_floor`)."""
    from totalrecall.paths import default_model_path
    from totalrecall_worker.llama_model import LlamaBackend, default_prefixes, query_input

    model = model_path or default_model_path()
    prefix = os.environ.get("TR_EMBEDDER_QUERY_PREFIX")
    if prefix is None:
        prefix = default_prefixes(model.name)[0]
    limit = int(os.environ.get("TR_EMBEDDER_QUERY_MAX_TOKENS") or 128)
    per: dict[int, list[float]] = {}
    asked: list[str] | None = None
    for t in threads:
        backend = LlamaBackend(model, n_threads=t)
        try:
            if asked is None:  # cut once: every thread count embeds the same texts
                asked = [query_input(x, prefix, limit, backend.count_tokens) for x in texts]
            for w in asked[:5]:
                backend.embed([w])
            lat = []
            for text in asked:
                t0 = time.perf_counter()
                backend.embed([text])
                lat.append((time.perf_counter() - t0) * 1000)
        finally:
            backend.close()
        per[t] = lat
    return per


def pooled_floor(samples: Sequence[dict[int, list[float]]]) -> Floor:
    """The floor of several `floor_samples` (rounds), each thread count's latencies pooled:
    per statistic the better thread count."""
    pooled: dict[int, list[float]] = {}
    for part in samples:
        for t, lat in part.items():
            pooled.setdefault(t, []).extend(lat)
    per = {t: (statistics.median(lat), pct(lat, 0.99)) for t, lat in pooled.items()}
    return Floor(min(a for a, _ in per.values()), min(b for _, b in per.values()), per)


def embedding_floor(texts: Sequence[str], model_path: Path | None = None,
                    threads: Sequence[int] = (1, 2)) -> Floor:
    return pooled_floor([floor_samples(texts, model_path, threads)])


def floor_ratios(what: str, lat: Sequence[float], floor: Floor, p50_target: float = 2.0,
                 p99_target: float = 4.0) -> tuple[Ratio, Ratio]:
    """`what`'s p50 and p99 ÷ the floor's, against their targets (`bench/ratios.py`)."""
    threads = {str(t): {"p50 ms": a, "p99 ms": b} for t, (a, b) in floor.per_threads.items()}

    def ratio(q: str, ms: float, floor_ms: float, target: float) -> Ratio:
        return Ratio(f"{what}: {q} ÷ floor", ms / floor_ms, target, "<=",
                     {f"{q} ms": ms, f"floor {q} ms": floor_ms, "floor per threads": threads,
                      "n": len(lat)})
    return (ratio("p50", statistics.median(lat), floor.p50, p50_target),
            ratio("p99", pct(lat, 0.99), floor.p99, p99_target))


def ratio_lines(what: str, lat: Sequence[float], floor: Floor, p50_target: float = 2.0,
                p99_target: float = 4.0) -> list[str]:
    r50, r99 = floor_ratios(what, lat, floor, p50_target, p99_target)

    def mark(r: Ratio) -> str:
        return "met" if r.met else "not met"
    return [f"{what} ÷ its floor (llama.cpp alone on the same texts, {floor.describe()}):",
            f"  p50 {r50.raw['p50 ms']:.1f} ms = {r50.value:.2f}× (target ≤ {p50_target}×: "
            f"{mark(r50)}), p99 {r99.raw['p99 ms']:.1f} ms = {r99.value:.2f}× "
            f"(target ≤ {p99_target}×: {mark(r99)})"]
