"""`totalrecall import`: batching, the summary, a rejected event isolated, the verb wired."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from totalrecall import main as cli
from totalrecall.commands.importing import Rejected, Summary, parse_since, run_import
from totalrecall.importers import Skip
from totalrecall_client import IngestResponse
from totalrecall_schema import MemoryEvent

DATA = Path(__file__).resolve().parents[2] / "data" / "importers"


def _events(n: int) -> list[MemoryEvent]:
    return [MemoryEvent(id=f"e{i}", summary=f"event number {i}") for i in range(n)]


def test_batches_never_exceed_the_size_and_repeats_are_skipped() -> None:
    batches: list[list[dict[str, Any]]] = []

    def send(batch: list[dict[str, Any]]) -> int:
        batches.append(list(batch))
        return 1
    items = [*_events(5), Skip("blank line"), *_events(2)]
    s = run_import(items, Summary("logs"), send, batch_size=2)
    assert [len(b) for b in batches] == [2, 2, 1]
    assert (s.read, s.sent, s.duplicates, s.events) == (8, 5, 3, 5)
    assert s.skipped == {"blank line": 1, "same id as an earlier record of this import": 2}
    assert batches[0][0]["id"] == "e0" and "tags" not in batches[0][0]


def test_an_event_the_api_rejects_is_found_and_skipped_the_rest_sent() -> None:
    sent: list[str] = []

    def send(batch: list[dict[str, Any]]) -> int:
        if any(e["id"] == "e5" for e in batch):
            raise Rejected("summary: too long")
        sent.extend(e["id"] for e in batch)
        return 0
    s = run_import(_events(8), Summary("logs"), send, batch_size=8)
    assert sorted(sent) == sorted(f"e{i}" for i in range(8) if i != 5)
    assert s.sent == 7 and s.skipped == {"rejected by the API: summary: too long": 1}


def test_dry_run_sends_nothing() -> None:
    s = run_import(_events(3), Summary("logs", dry_run=True), None)
    assert (s.sent, s.events) == (0, 3)


def test_since_accepts_dates_and_ages() -> None:
    assert parse_since("2026-01-02").isoformat() == "2026-01-02T00:00:00+00:00"
    assert parse_since("2026-01-02T10:00+02:00").utcoffset() is not None
    assert (parse_since("1d") - parse_since("2d")).total_seconds() == pytest.approx(86400, abs=5)


class _FakeClient:
    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []

    def ingest(self, batch: list[dict[str, Any]]) -> Any:
        self.batches.append(batch)
        return IngestResponse(ids=[e["id"] for e in batch], accepted=len(batch), duplicates=0)


def test_the_verb_prints_a_json_summary(capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeClient()
    from totalrecall.commands import importing as import_cmd

    real_main = import_cmd.main
    monkeypatch.setattr(import_cmd, "main", lambda argv: real_main(argv, client=fake))
    code = cli.main(["import", "journal", str(DATA / "journal" / "journal.json"),
                     "--namespace", "ops", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out == {"source": "journal", "dry_run": False, "read": 5, "events": 3, "sent": 3,
                   "duplicates": 0, "skipped": {"empty MESSAGE": 1, "not JSON": 1},
                   "namespaces": {"ops": 3}, "error": None}
    assert [e["namespace"] for e in fake.batches[0]] == ["ops"] * 3


def test_an_unreachable_api_is_exit_1_with_the_reason(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOTALRECALL_API", "http://127.0.0.1:9")  # discard port: refused
    code = cli.main(["import", "logs", str(DATA / "logs" / "app.log"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["sent"] == 0 and "re-running the import is safe" in out["error"]


def test_a_missing_path_is_a_usage_error_before_anything_is_read(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli.main(["import", "logs", str(tmp_path / "nope.log"), "--dry-run"]) == 2
    assert "nope.log" in capsys.readouterr().err


def test_no_default_history_is_exit_2_with_the_reason(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cli.main(["import", "shell", "--dry-run", "--json"]) == 2
    assert "no shell history" in json.loads(capsys.readouterr().out)["error"]
