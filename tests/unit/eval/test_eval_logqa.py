"""LogQA loading, scoring, the BM25 baseline and the report (tiny synthetic files, no network)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from eval import report
from eval.bm25_baseline import bm25_rankings
from eval.logqa import gold_lines, load_logqa
from eval.logqa_runner import summarise, wait_drained
from eval.metrics import answers_question, logqa_scores, tokens

HDFS = """LineId,Date,Time,Pid,Level,Component,Content,EventId,EventTemplate
1,081109,203615,148,INFO,dfs.DataNode$PacketResponder,PacketResponder 1 for block blk_388 terminating,E10,x
2,081109,203807,222,INFO,dfs.DataNode$PacketResponder,PacketResponder 0 for block blk_-695 terminating,E10,x
3,081110,000102,35,WARN,dfs.DataNode,Received block blk_-695 of size 67108864 from /10.250.7.146,E5,x
"""
SSH = """LineId,Date,Day,Time,Component,Pid,Content,EventId,EventTemplate
1,Dec,10,06:55:46,LabSZ,24200,Invalid user webmaster from 173.234.31.186,E13,x
2,Dec,10,06:55:48,LabSZ,24202,Failed password for root from 5.36.59.76 port 42393 ssh2,E9,x
"""
SPARK = """LineId,Date,Time,Level,Component,Content,EventId,EventTemplate
1,17/06/09,20:10:40,INFO,executor.CoarseGrainedExecutorBackend,"Registered signal handlers for [TERM, HUP, INT]",E22,x
2,17/06/09,20:10:41,INFO,storage.MemoryStore,Block broadcast_3 stored as values in memory,E1,x
"""


def _qa(*rows: tuple[str, str]) -> str:
    return "".join(json.dumps({"Question": q, "Answer": "a", "RawLog": raw}) + "\n"
                   for q, raw in rows)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "logqa"
    d.mkdir()
    (d / "HDFS_2k.log_structured.csv").write_text(HDFS)
    (d / "OpenSSH_2k.log_structured.csv").write_text(SSH)
    (d / "Spark_2k.log_structured.csv").write_text(SPARK)
    (d / "HDFS_qa_train.jsonl").write_text(_qa(
        ("What is the status of blk_388?", "PacketResponder 1 for block blk_388 terminating"),
        ("Where did blk_-695 come from?", "from /10.250.7.146"),          # a part: contains
        ("Unanswerable?", "no such line")))                               # dropped
    (d / "HDFS_qa_val.jsonl").write_text(_qa(("Which block terminated with responder 0?",
                                              "PacketResponder 0 for block blk_-695 terminating")))
    (d / "OpenSSH_qa_train.jsonl").write_text(_qa(("Which user was invalid?",
                                                  "Invalid user webmaster from 173.234.31.186")))
    (d / "Spark_qa_train.jsonl").write_text(_qa(("Which signals have handlers?",
                                                "Registered signal handlers for [TERM, HUP, INT]")))
    return tmp_path


def test_lines_are_loaded_as_a_log_importer_would(data_dir: Path) -> None:
    from totalrecall_schema.api import IngestEvent

    hdfs, ssh, spark = load_logqa(data_dir)
    line = hdfs.lines[0]
    assert line.id == "hdfs:1" and line.timestamp == datetime(2008, 11, 9, 20, 36, 15, tzinfo=UTC)
    assert hdfs.lines[2].timestamp == datetime(2008, 11, 10, 0, 1, 2, tzinfo=UTC)
    assert line.text == ("INFO dfs.DataNode$PacketResponder[148]: "
                         "PacketResponder 1 for block blk_388 terminating")
    assert ssh.lines[0].text == "LabSZ[24200]: Invalid user webmaster from 173.234.31.186"
    assert ssh.lines[0].timestamp == datetime(2024, 12, 10, 6, 55, 46, tzinfo=UTC)
    assert spark.lines[0].text.startswith("INFO executor.CoarseGrainedExecutorBackend: Registered")
    assert spark.lines[0].timestamp == datetime(2017, 6, 9, 20, 10, 40, tzinfo=UTC)
    ev = hdfs.lines[2].to_ingest("ev1.logqa-HDFS")
    IngestEvent(**ev)                                           # valid against the contract
    assert ev["id"] == "hdfs:3" and ev["category"] == "system.service"
    assert ev["source"] == "journal" and ev["timestamp"] == "2008-11-10T00:01:02+00:00"
    assert ev["metadata"] == {"service": "dfs.DataNode", "system": "HDFS", "line": 3,
                              "severity": "warning", "level": "WARN", "pid": "35"}
    assert "level" not in ssh.lines[0].to_ingest("n")["metadata"]
    assert ev == hdfs.lines[2].to_ingest("ev1.logqa-HDFS")      # stable: idempotent re-ingest


def test_questions_gold_and_splits(data_dir: Path) -> None:
    hdfs, _ssh, spark = load_logqa(data_dir)
    qs = {q.question: q for q in hdfs.questions}
    assert set(qs) == {"What is the status of blk_388?", "Where did blk_-695 come from?",
                       "Which block terminated with responder 0?"}          # unanswerable dropped
    assert qs["What is the status of blk_388?"].gold == {"hdfs:1"}
    assert qs["Where did blk_-695 come from?"].gold == {"hdfs:3"}
    assert qs["Which block terminated with responder 0?"].split == "val"
    assert qs["Which block terminated with responder 0?"].category == "HDFS val"
    assert [q.qid for q in hdfs.questions] == ["HDFS/train#0", "HDFS/train#1", "HDFS/val#0"]
    assert [q.split for q in spark.questions] == ["train"]                  # no val file


def test_gold_prefers_exact_content_over_containment(data_dir: Path) -> None:
    [hdfs] = load_logqa(data_dir, systems=("HDFS",))
    assert gold_lines(hdfs.lines, "PacketResponder 1 for block blk_388 terminating") == {"hdfs:1"}
    assert gold_lines(hdfs.lines, "blk_-695") == {"hdfs:2", "hdfs:3"}
    assert gold_lines(hdfs.lines, "") == frozenset()


def test_bm25_baseline_finds_the_line_by_its_identifier(data_dir: Path) -> None:
    [hdfs] = load_logqa(data_dir, systems=("HDFS",))
    ranked = bm25_rankings([ln.id for ln in hdfs.lines], [ln.text for ln in hdfs.lines],
                           ["what happened to blk_388?", "size 67108864", "zebra"], k=10)
    assert ranked[0][0] == "hdfs:1" and ranked[1] == ["hdfs:3"] and ranked[2] == []


def test_summary_rows_per_split_and_system() -> None:
    per_q = [{"category": "HDFS train", "scores": {"Hit@1": 1.0, "MRR": 1.0}},
             {"category": "HDFS val", "scores": {"Hit@1": 0.0, "MRR": 0.5}},
             {"category": "Spark train", "scores": {"Hit@1": 0.0, "MRR": 0.0}}]
    s = summarise(per_q, ["HDFS", "Spark"])
    assert list(s) == ["all", "train", "val", "HDFS", "HDFS train", "HDFS val", "Spark",
                       "Spark train"]                                       # empty "Spark val" out
    assert s["all"] == {"n": 3, "Hit@1": pytest.approx(0.3333), "MRR": 0.5}
    assert s["train"]["n"] == 2 and s["HDFS"]["MRR"] == 0.75


class _Stats:
    """A client whose /memory/stats answers from a script of per-namespace counts: each poll
    (which asks for namespace "a" first) moves to the script's next step, the last one stays."""

    def __init__(self, script: list[dict[str, int]]) -> None:
        self.script, self.step = script, -1

    def stats(self, namespace: str | None = None) -> Any:
        if namespace == "a":
            self.step = min(self.step + 1, len(self.script) - 1)
        return {"namespace": namespace, "total": self.script[self.step].get(namespace or "", 0)}


def test_wait_ends_when_every_line_is_stored() -> None:
    client = _Stats([{"a": 1}, {"a": 3}])
    method, counts = wait_drained(client, {"a": 3}, "s", timeout=5, every=0)  # type: ignore[arg-type]
    assert method == "stats" and counts == {"a": 3}


def test_wait_ends_on_the_sentinel_when_lines_were_folded() -> None:
    client = _Stats([{"a": 1}, {"a": 2, "s": 1}])
    method, counts = wait_drained(client, {"a": 3}, "s", timeout=5, settle_s=0,  # type: ignore[arg-type]
                                  every=0)
    assert method.startswith("sentinel") and counts == {"a": 2}


def test_wait_times_out() -> None:
    with pytest.raises(TimeoutError):
        wait_drained(_Stats([{"a": 1}]), {"a": 3}, "s", timeout=0.05, every=0.01)  # type: ignore[arg-type]


def test_report_shows_bm25_beside_ours_and_the_folds() -> None:
    answered = {"answered@1": 1.0, "answered@5": 1.0, "answered@10": 1.0}
    questions = [{"qid": f"HDFS/train#{i}", "category": "HDFS train",
                  "scores": {"Hit@1": 1.0, "Hit@5": 1.0, "Hit@10": 1.0, "MRR": 1.0, **answered},
                  "bm25_scores": {"Hit@1": 0.0, "Hit@5": 1.0, "Hit@10": 1.0, "MRR": 0.5,
                                  **answered, "answered@1": 0.0}}
                 for i in range(4)]
    result = {"dataset": "logqa", "run_at": "t", "api": "http://x",
              "config": {"maxResults": 10, "asOf": "now"},
              "counts": {"haystacks": 1, "turns": 4, "questions": 4, "unit": "log lines",
                         "stored": {"ev.logqa-HDFS": 2}},
              "timing": {"ingest_wall_s": 1, "ingest_turns_per_s": 4, "ingest_post_s": 0.1,
                         "searchable_by": "stats", "query_wall_s": 1, "recall_p50_ms": 1,
                         "recall_p99_ms": 2},
              "summary": summarise(questions, ["HDFS"]),
              "baselines": {"BM25 (bm25s)": summarise(questions, ["HDFS"], "bm25_scores")},
              "targets": {}, "questions": questions,
              "commit": "0123456789abcdef", "dirty": False, "machine": "a 2-core box"}
    text = report.render(result)
    assert "Run t at 0123456789 on a 2-core box against http://x" in text
    assert ("| set | n | Hit@1 | Hit@5 | Hit@10 | MRR | answered@1 | answered@5 | answered@10 "
            "| BM25 Hit@1 | BM25 Hit@5 | BM25 Hit@10 | BM25 MRR | BM25 answered@1 |") in text
    assert ("| all | 4 | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 "
            "| 0.000 | 1.000 | 1.000 | 0.500 | 0.000 | 1.000 | 1.000 |") in text
    assert "4 log lines" in text and "HDFS 2 (the rest folded" in text
    assert "| fold | n | answered@1 | answered@5 | Hit@1 |" in text and "| all | 4 |" in text


def test_a_line_answers_when_it_holds_the_answer_and_every_value_the_question_names() -> None:
    gold = "INFO dfs.DataNode$PacketResponder[148]: PacketResponder 1 for block blk_388 terminating"
    q, a = "What is the status of packet responder 1 for block blk_388?", "terminating"
    assert answers_question(gold, q, a, gold)
    # the same template, another block: it answers another question
    other = gold.replace("blk_388", "blk_-695")
    assert not answers_question(other, q, a, gold)
    # a value as a whole token only: blk_3880 is not blk_388; the port of an address is its own
    assert not answers_question(gold.replace("blk_388", "blk_3880"), q, a, gold)
    assert tokens("from /10.250.7.146:50010.") == {"from", "10.250.7.146", "50010"}
    # without the answer it does not answer, case aside
    assert not answers_question(gold.replace("terminating", "started"), q, a, gold)
    assert answers_question(gold.upper(), q, a, gold)
    # a question that names no value: every line of the template with the answer answers
    assert answers_question(other, "Which responders are terminating?", a, gold)


def test_answered_at_k_counts_a_gold_line_and_an_answering_line() -> None:
    good = {"l2", "l7"}
    scores = logqa_scores(["l1", "l2", "l3"], {"l3"}, answers=lambda line: line in good)
    assert scores["Hit@1"] == 0.0 and scores["Hit@5"] == 1.0
    assert (scores["answered@1"], scores["answered@5"], scores["answered@10"]) == (0.0, 1.0, 1.0)
    assert logqa_scores(["l3"], {"l3"}, answers=lambda line: False)["answered@1"] == 1.0
    assert "answered@1" not in logqa_scores(["l3"], {"l3"})  # no texts: Hit@k only
