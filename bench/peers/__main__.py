"""`make bench-peers`: Total Recall beside the memory systems people use, on one machine in one run.

    python -m bench.peers                  # everything (~30 min on 2 cores), writes docs/peers.md
    python -m bench.peers --quick          # 1 LoCoMo conversation, 20 LogQA questions per system,
                                           # 5k memories for latency; prints, writes nothing shared
    python -m bench.peers --only "Total Recall" "Postgres FTS"

Each system in turn (never two at once: they share 2 cores): start it, load every LoCoMo dev
conversation and LogQA system into its own namespace, ask every question (scored by `eval`'s own
metrics), then load the latency corpus (20k memories) into one namespace and time recalls there,
time write → searchable with probe memories, and read the system's resident memory (PSS of its
process tree). Also the raw llama.cpp query embedding time (the floor). See docs/peers.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.machine import describe
from bench.recall_bench import _prompts
from eval import metrics as M
from eval.logqa_runner import summarise as logqa_summarise
from eval.runner import summarise as locomo_summarise

from . import systems as S
from .procmem import pss_mib
from .report import render
from .workload import Corpus, Doc, latency_corpus, namespace, probe, quality_corpora

REPO = Path(__file__).resolve().parents[2]
K = 10
#: integrations/openclaw/src/hooks.ts: MAX_QUERY_CHARS.
PLUGIN_MAX_QUERY_CHARS = 8000
Log = Callable[[str], None]


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", flush=True)


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def add_all(system: S.System, ns: str, docs: Sequence[Doc], batch: int = 200) -> None:
    for i in range(0, len(docs), batch):
        system.add(ns, docs[i:i + batch])


def score_quality(system: S.System, corpora: Sequence[Corpus], tag: str) -> dict[str, Any]:
    """Every question of every corpus, scored as `make eval` scores it → summary rows."""
    per: dict[str, list[dict[str, Any]]] = {"locomo": [], "logqa": []}
    for c in corpora:
        ns = namespace(tag, c.key)
        for q in c.queries:
            ranked = system.search(ns, q.text, K)
            scores = (M.locomo_scores(ranked, q.gold) if c.dataset == "locomo"
                      else M.logqa_scores(ranked, q.gold))
            per[c.dataset].append({"qid": q.qid, "category": q.category, "ranked": ranked,
                                   "scores": scores})
    out: dict[str, Any] = {"questions": {k: len(v) for k, v in per.items()}}
    if per["locomo"]:
        out["locomo"] = locomo_summarise("locomo", per["locomo"]).get("cats 1-4", {})
    if per["logqa"]:
        systems = sorted({c.key.split("/", 1)[1] for c in corpora if c.dataset == "logqa"})
        out["logqa"] = logqa_summarise(per["logqa"], systems).get("all", {})
    out["per_question"] = per
    return out


def time_recall(system: S.System, ns: str, queries: Sequence[str], warmup: int = 5
                ) -> tuple[list[float], int]:
    """→ (ms per timed query, how many of them returned anything: a sanity check)."""
    for q in queries[:warmup]:
        system.search(ns, q, K)
    times = []
    answered = 0
    for q in queries[warmup:]:
        t0 = time.perf_counter()
        ids = system.search(ns, q, K)
        times.append((time.perf_counter() - t0) * 1000)
        answered += bool(ids)
    return times, answered


def write_to_searchable(system: S.System, ns: str, n: int, timeout: float = 60.0
                        ) -> list[float | None]:
    """ms from handing over a new memory until a search for its text returns it, n times
    (None: not returned within `timeout`)."""
    out: list[float | None] = []
    for i in range(n):
        doc = probe(i, datetime.now(UTC))
        t0 = time.perf_counter()
        system.add(ns, [doc])
        found: float | None = None
        while time.perf_counter() - t0 < timeout:
            if doc.id in system.search(ns, doc.text, K):
                found = (time.perf_counter() - t0) * 1000
                break
            time.sleep(0.005)
        out.append(found)
        if found is None:
            log(f"{system.name}: probe {doc.id} not returned within {timeout:.0f} s")
            break
    return out


def measure(system: S.System, quality: Sequence[Corpus], latency: Corpus, tag: str,
            probes: int, prompts: Sequence[str], score: bool = True) -> dict[str, Any]:
    """One run of one system. `score`: ask the quality questions too (the first run: the same
    memories and questions give the same answers in every run, and mem0 takes ~15 min)."""
    res: dict[str, Any] = {"name": system.name, "load_before": loadavg()}
    t0 = time.perf_counter()
    system.start()
    res["start_s"] = round(time.perf_counter() - t0, 1)
    res["config"] = dict(getattr(system, "config", {}) or {})
    lat_ns = namespace(tag, latency.key)
    for c in [*quality, latency]:   # every namespace known before the first flush
        system.add(namespace(tag, c.key), [])

    bulk = bool(getattr(system, "bulk", False))
    load = system.seed if bulk else (lambda ns, docs: add_all(system, ns, docs))  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    for c in quality:
        load(namespace(tag, c.key), c.docs)
    system.flush()
    quality_s = time.perf_counter() - t0
    res["quality_ingest_s"] = round(quality_s, 1)
    res["quality_memories"] = sum(len(c.docs) for c in quality)
    log(f"{system.name}: quality corpora searchable in {res['quality_ingest_s']} s"
        + ("; asking" if score else ""))
    if score:
        q = score_quality(system, quality, tag)
        for ds, metrics in (("locomo", ("R@5", "R@10", "MRR")),
                            ("logqa", ("Hit@1", "Hit@5", "MRR"))):
            for m in metrics:
                if m in q.get(ds, {}):
                    res[f"{ds}_{m}"] = q[ds][m]
        res["questions"] = q["questions"]
        res["per_question"] = {ds: [{"qid": x["qid"], "scores": x["scores"]} for x in qs]
                               for ds, qs in q["per_question"].items()}

    timed = latency.docs[:system.ingest_sample] if bulk else latency.docs  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    add_all(system, lat_ns, timed)
    system.flush()
    ingest_s = time.perf_counter() - t0
    if bulk:
        load(lat_ns, latency.docs[len(timed):])
        system.flush()
    res["latency_memories"] = len(latency.docs)
    res["latency_ingest_s"] = round(ingest_s, 1)
    # Ingest /s: the quality corpora (texts new to the system: the latency corpus repeats them,
    # and a system with an embedding cache would load those repeats for free); for a bulk-loaded
    # peer, its real add() on the first memories of the latency corpus (it has no cache).
    if bulk:
        res["ingest_timed_on"] = f"{len(timed)} add() calls"
        res["ingest_per_s"] = len(timed) / ingest_s
    else:
        res["ingest_timed_on"] = f"the quality corpora ({res['quality_memories']} memories)"
        res["ingest_per_s"] = res["quality_memories"] / quality_s
    log(f"{system.name}: {len(timed)} memories searchable in {ingest_s:.1f} s; timing")
    times, answered = time_recall(system, lat_ns, [x.text for x in latency.queries])
    res["recall_n"] = len(times)
    res["recall_answered"] = answered
    res["recall_p50_ms"] = M.percentile(times, 50)
    res["recall_p99_ms"] = M.percentile(times, 99)
    # Whole prompts, as the OpenClaw plugin's automatic recall sends them on every turn.
    ptimes, _ = time_recall(system, lat_ns, prompts)
    res["prompt_n"] = len(ptimes)
    res["prompt_p50_ms"] = M.percentile(ptimes, 50)
    res["prompt_p99_ms"] = M.percentile(ptimes, 99)
    probes_ms = write_to_searchable(system, lat_ns, probes)
    found = [x for x in probes_ms if x is not None]
    res["searchable_ms"] = statistics.median(found) if len(found) == len(probes_ms) else None
    res["searchable_all_ms"] = [round(x, 1) if x is not None else None for x in probes_ms]
    res["memory_mib"] = pss_mib(system.pids())
    res["load_after"] = loadavg()
    return res


def _embed_times(llm: Any, texts: Sequence[str]) -> dict[str, float]:
    for q in texts[:5]:
        llm.embed(q, truncate=True)
    times = []
    for q in texts:
        t0 = time.perf_counter()
        llm.embed(q, truncate=True)
        times.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": M.percentile(times, 50), "p99_ms": M.percentile(times, 99)}


def floor(model: Path, queries: Sequence[str], prompts: Sequence[str],
          threads: Sequence[int] = (1, 2)) -> dict[str, Any]:
    """Raw llama.cpp embedding of the questions (the embedder's n_ctx 256) and of the whole
    prompts (n_ctx 512, the model's longest: longer prompts are cut), per thread count."""
    from llama_cpp import Llama

    out: dict[str, Any] = {"model": model.name, "n": len(queries), "prompts_n": len(prompts)}
    for t in threads:
        for kind, texts, n_ctx in (("threads", queries, 256), ("prompt_threads", prompts, 512)):
            llm = Llama(model_path=str(model), embedding=True, n_ctx=n_ctx, n_batch=n_ctx,
                        n_ubatch=n_ctx, n_threads=t, n_threads_batch=t, verbose=False)
            out[f"{kind}_{t}"] = _embed_times(llm, texts)
            del llm
    out["p50_ms"] = min(v["p50_ms"] for k, v in out.items() if k.startswith("threads_"))
    out["prompt_p50_ms"] = min(v["p50_ms"] for k, v in out.items()
                               if k.startswith("prompt_threads_"))
    return out


def build_systems(names: Sequence[str], workdir: Path, model: Path, mem0_adds: int = 1000
                  ) -> list[tuple[str, Callable[[], Any]]]:
    factories: dict[str, Callable[[], Any]] = {
        "Total Recall": lambda: S.TotalRecallSystem(log),
        TR_BARE: lambda: S.TotalRecallSystem(log, bare=True, name=TR_BARE),
        "mem0": lambda: S.mem0_system(workdir, adds=mem0_adds),
        MEM0_PG: lambda: S.mem0_system(workdir, pgvector=True, adds=mem0_adds),
        OPENCLAW_HYBRID: lambda: S.openclaw_system(workdir, {"OPENCLAW_UNDATED": "1"},
                                                   name=OPENCLAW_HYBRID, model=model),
        "OpenClaw memory-core": lambda: S.openclaw_system(workdir),
        OPENCLAW_UNDATED: lambda: S.openclaw_system(workdir, {"OPENCLAW_UNDATED": "1"},
                                                    name=OPENCLAW_UNDATED),
        "Postgres FTS": S.pgfts_system,
        "SQLite FTS5": lambda: S.baseline_system("fts5", "SQLite FTS5", workdir, model),
        "bm25s": lambda: S.baseline_system("bm25s", "bm25s", workdir, model),
        PLAIN_HYBRID: lambda: S.baseline_system("hybrid", PLAIN_HYBRID, workdir, model),
    }
    return [(n, factories[n]) for n in names]


TR_BARE = "Total Recall, text and time only"
MEM0_PG = "mem0, pgvector server"
OPENCLAW_HYBRID = "OpenClaw memory-core, hybrid"
PLAIN_HYBRID = "plain hybrid (0.7·cos + 0.3·BM25)"
#: In the order they run (each run): ours, then the peers, then the plain baselines.
ALL = ("Total Recall", TR_BARE, OPENCLAW_HYBRID, MEM0_PG, "mem0", PLAIN_HYBRID, "bm25s",
       "SQLite FTS5", "Postgres FTS")
#: Variants (only with --only): memory-core keyword-only (no embeddings provider), with its daily
#: files (30-day decay) or one undated file.
OPENCLAW_UNDATED = "OpenClaw memory-core, one undated file"
EXTRA = ("OpenClaw memory-core", OPENCLAW_UNDATED)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="+", choices=(*ALL, *EXTRA), default=list(ALL))
    ap.add_argument("--merge", action="store_true",
                    help="add these systems to the existing result (--out) instead of a new one")
    ap.add_argument("--n", type=int, help="memories in the latency namespace (20000; quick 5000)")
    ap.add_argument("--queries", type=int, help="timed recalls (300; quick 100)")
    ap.add_argument("--datasets", nargs="+", choices=("locomo", "logqa"),
                    default=["locomo", "logqa"], help="quality datasets (a smoke run: locomo)")
    ap.add_argument("--conversations", type=int,
                    help="only the first N LoCoMo dev conversations (default all; quick 1)")
    ap.add_argument("--logqa-systems", nargs="+", choices=("HDFS", "OpenSSH", "Spark"),
                    help="only these LogQA systems (default all)")
    ap.add_argument("--probes", type=int, default=5, help="write→searchable probes")
    ap.add_argument("--mem0-adds", type=int, default=1000,
                    help="memories mem0 gets through its own add() (timed: its ingest /s); the "
                         "rest through the adapter's batched seed")
    ap.add_argument("--prompts", type=int, default=60,
                    help="timed recalls of whole prompts, as the OpenClaw plugin sends them (60)")
    ap.add_argument("--runs", type=int, default=3,
                    help="runs of every system (3; the table gives the median and the spread)")
    ap.add_argument("--score-every-run", action="store_true",
                    help="ask the quality questions in every run (default: the first only; the "
                         "same memories and questions give the same answers)")
    ap.add_argument("--out", type=Path, help="the JSON result (default bench/results/peers"
                                             "[-quick].json)")
    ap.add_argument("--doc", type=Path, help="the Markdown report (default docs/peers.md; "
                                             "--quick: none)")
    a = ap.parse_args(argv)
    n = a.n or (5000 if a.quick else 20000)
    n_queries = a.queries or (100 if a.quick else 300)
    out = a.out or REPO / "bench" / "results" / ("peers-quick.json" if a.quick else "peers.json")
    doc = a.doc or (None if a.quick else REPO / "docs" / "peers.md")

    machine = describe()
    log(f"{machine}; load average {loadavg()}")
    quality = [c for c in quality_corpora(
                   conversations=a.conversations or (1 if a.quick else None),
                   logqa_questions=20 if a.quick else None, logqa_systems=a.logqa_systems)
               if c.dataset in a.datasets]
    latency = latency_corpus(quality, n, n_queries + 5)
    log(f"quality: {len(quality)} namespaces, {sum(len(c.docs) for c in quality)} memories, "
        f"{sum(len(c.queries) for c in quality)} questions; latency: {len(latency.docs)} "
        f"memories, {len(latency.queries)} queries")
    # What the plugin's automatic recall sends: the user's message, its last MAX_QUERY_CHARS.
    prompts = [x[-PLUGIN_MAX_QUERY_CHARS:] for x in _prompts(a.prompts + 5)]
    previous = json.loads(out.read_text()) if a.merge and out.exists() else None
    result: dict[str, Any] = {"run_at": datetime.now(UTC).isoformat(timespec="seconds"),
                              "commit": _commit(), "machine": machine, "quick": a.quick, "k": K,
                              "latency_corpus": {"n": len(latency.docs),
                                                 "queries": len(latency.queries),
                                                 "prompts": len(prompts)},
                              "quality": [{"key": c.key, "memories": len(c.docs),
                                           "questions": len(c.queries)} for c in quality],
                              "runs_asked": a.runs, "runs": [], "unavailable": {}}
    from eval.stack import default_model_path

    model = default_model_path()
    if previous is not None:
        result = previous
        result.setdefault("runs", [])
        result.setdefault("merged_runs", []).append(
            {"run_at": datetime.now(UTC).isoformat(timespec="seconds"), "systems": a.only,
             "commit": _commit(), "load": loadavg()})
    else:
        log(f"floor: raw llama.cpp embedding with {model}")
        result["floor"] = floor(model, [x.text for x in latency.queries], prompts)
        log(f"floor p50 {result['floor']['p50_ms']:.2f} ms (questions), "
            f"{result['floor']['prompt_p50_ms']:.2f} ms (prompts)")

    workdir = Path(tempfile.mkdtemp(prefix="tr-peers-"))
    try:
        for run in range(1, a.runs + 1):
            tag = f"peers{int(time.time())}"
            for name, make in build_systems(a.only, workdir, model, a.mem0_adds):
                log(f"=== {name}, run {run} of {a.runs} === load average {loadavg()}")
                system = None
                try:
                    system = make()
                    r = measure(system, quality, latency, tag, a.probes, prompts,
                                score=run == 1 or a.score_every_run)
                    r["run"] = run
                    result["runs"].append(r)
                    write(result, out, doc)     # after each system: a long run keeps what it has
                    log(f"{name}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()
                                                if isinstance(v, float)))
                except Exception as exc:  # noqa: BLE001 - a peer that cannot run is reported
                    detail = f"{type(exc).__name__}: {exc}"
                    tail = getattr(system, "stderr_tail", None)
                    if callable(tail):
                        detail += f"\nstderr: {tail(1500)}"
                    result["unavailable"][f"{name} (run {run})"] = detail
                    log(f"{name} could not run: {detail}")
                finally:
                    if system is not None:
                        try:
                            system.stop()
                        except Exception as exc:  # noqa: BLE001
                            log(f"{name}: stop failed: {exc}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(write(result, out, doc))
    log(f"wrote {out}" + (f" and {doc}" if doc else ""))
    return 0 if not result["unavailable"] else 1


def _commit() -> str | None:
    """The commit measured (Total Recall runs from this tree), with `+` when it has changes.
    The results this command writes (bench/results/, docs/peers.md) are no change of the code
    measured: a `--merge` run after a first run of the same tree is of the same commit."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                ".", ":(exclude)bench/results", ":(exclude)docs/peers.md"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+" if dirty else "")


def write(result: dict[str, Any], out: Path, doc: Path | None) -> str:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    text = render(result)
    if doc is not None:
        doc.write_text(text)
    return text


if __name__ == "__main__":
    sys.exit(main())
