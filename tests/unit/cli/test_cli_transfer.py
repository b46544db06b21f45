"""`totalrecall export` / `import-jsonl` and the `jsonl` importer, against the fake API."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
from cli_fake_api import NOW, FakeApi, run_cli
from totalrecall.commands import transfer
from totalrecall.importers.jsonl import BadLine, read
from totalrecall_schema import ExportedMemory


def _varied(api: FakeApi, namespace: str = "default") -> None:
    api.add(id="plain", namespace=namespace, summary="a plain memory", timestamp=NOW)
    api.add(id="rich", namespace=namespace, category="system.service", subcategory="failure",
            actor="watcher", source="journal", summary="nginx ✗ failed — ünïcödé 日本語 🙂",
            detail="line 1\nline 2\t\"quoted\" <b>&amp;</b>\n```\ncode\n```" + "x" * 20_000,
            timestamp=NOW - timedelta(days=40),
            metadata={"severity": "critical", "service": "nginx", "tags": ["web", "ops"],
                      "exit_code": 1, "nested": {"list": [1, 2.5, None, "s"]}})


def test_export_import_export_is_the_same(api: FakeApi, capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    _varied(api)
    first = tmp_path / "a.jsonl"
    code, out, _ = run_cli(capsys, "export", "-o", str(first))
    assert code == 0 and out == f"Exported 2 memories of namespace default to {first}.\n"
    assert not list(tmp_path.glob(".*partial"))
    code, out, _ = run_cli(capsys, "import-jsonl", str(first), "--namespace", "copy", "--json")
    summary = json.loads(out)
    assert code == 0 and summary["read"] == 2 and summary["sent"] == 2
    assert summary["namespaces"] == {"copy": 2} and summary["skipped"] == []
    second = tmp_path / "b.jsonl"
    code, _, _ = run_cli(capsys, "export", "--namespace", "copy", "-o", str(second), "--json")

    def lines(p: Path) -> list[dict[str, object]]:
        return [{**json.loads(x), "namespace": "-"} for x in p.read_text().splitlines()]

    assert sorted(lines(first), key=lambda d: str(d["id"])) == \
        sorted(lines(second), key=lambda d: str(d["id"]))
    # importing again adds nothing (same ids)
    code, out, _ = run_cli(capsys, "import-jsonl", str(first), "--namespace", "copy")
    assert code == 0 and "(2 already there)" in out


def test_export_to_stdout_keeps_the_summary_on_stderr(
        api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    _varied(api)
    code, out, err = run_cli(capsys, "export")
    assert code == 0 and len(out.splitlines()) == 2
    assert {ExportedMemory.model_validate_json(x).id for x in out.splitlines()} == {"plain", "rich"}
    assert err == "Exported 2 memories of namespace default to standard output.\n"


def test_a_cut_off_export_leaves_no_file(api: FakeApi, capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    _varied(api)
    api.cut_export_after = 1
    target = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "export", "-o", str(target))
    assert code == 2 and "incomplete chunked read" in err
    assert list(tmp_path.iterdir()) == []  # neither the file nor its partial copy


def test_import_sends_batches_under_the_apis_limits(
        api: FakeApi, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transfer, "BATCH_EVENTS", 3)
    monkeypatch.setattr(transfer, "BATCH_BYTES", 50_000)
    for i in range(7):
        api.add(id=f"m{i}", summary=f"memory {i}", detail="d" * (30_000 if i == 4 else 10))
    src = tmp_path / "all.jsonl"
    run_cli(capsys, "export", "-o", str(src))
    api.events.clear()
    code, _, _ = run_cli(capsys, "import-jsonl", str(src))
    assert code == 0 and len(api.events) == 7
    sizes = [len(b) for b in api.bodies("/memory/ingest")]
    assert sum(sizes) == 7 and max(sizes) <= 3 and len(sizes) >= 3


def test_a_bad_line_stops_the_import_unless_skipped(
        api: FakeApi, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _varied(api)
    src = tmp_path / "x.jsonl"
    run_cli(capsys, "export", "-o", str(src))
    good = src.read_text().splitlines()
    src.write_text("\n".join([good[0], '{"id": "no-summary"}', "", good[1]]) + "\n")
    api.events.clear()
    code, _, err = run_cli(capsys, "import-jsonl", str(src))
    assert code == 1 and f"{src}:2: summary: Field required" in err
    assert len(api.events) == 1  # what came before it
    code, out, _ = run_cli(capsys, "import-jsonl", str(src), "--skip-bad", "--json")
    res = json.loads(out)
    assert code == 0 and res["read"] == 2 and len(res["skipped"]) == 1
    assert len(api.events) == 2
    code, out, _ = run_cli(capsys, "import-jsonl", str(tmp_path / "nope.jsonl"))
    assert code == 1


def test_import_dry_run_sends_nothing(api: FakeApi, capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    _varied(api)
    src = tmp_path / "x.jsonl"
    run_cli(capsys, "export", "-o", str(src))
    code, out, _ = run_cli(capsys, "import-jsonl", str(src), "--dry-run")
    assert code == 0 and out.startswith("Checked 2 memories") and api.bodies("/memory/ingest") == []


def test_the_jsonl_reader_yields_ingestible_events(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    line = {"id": "k", "timestamp": "2026-01-02T03:04:05.678901+00:00", "namespace": "n",
            "category": "diagnosis", "subcategory": "root_cause", "actor": "agent",
            "source": "mcp", "summary": "s", "detail": "", "repeat_count": 4,
            "last_seen": "2026-01-03T00:00:00+00:00",
            "metadata": {"severity": "warning", "tags": ["a"], "custom": {"x": 1}}}
    f = tmp_path / "one.jsonl"
    f.write_text(json.dumps(line) + "\n\n")
    (event,) = list(read(f))
    assert "repeat_count" not in event and "last_seen" not in event
    assert event["timestamp"] == "2026-01-02T03:04:05.678901Z"
    assert event["metadata"]["custom"] == {"x": 1} and event["metadata"]["severity"] == "warning"
    assert event["subcategory"] == "root_cause" and event["actor"] == "agent"
    seen: list[int] = []
    assert len(list(read(f, on_bytes=seen.append))) == 1 and sum(seen) == f.stat().st_size
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(f.read_bytes())))
    assert list(read("-")) == [event]
    f.write_text('{"id": "k", "summary": "s", "category": "nonsense"}\n')
    with pytest.raises(BadLine, match=r"one.jsonl:1: category: Value error, unknown category"):
        list(read(f))


def test_the_jsonl_source_fits_the_import_registry(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`JsonlImporter` as `totalrecall import jsonl` calls it: events, or a `Skip` per bad line
    (the registry's `importers.base.Skip`; a stand-in until the two branches meet)."""
    import sys
    import types
    from dataclasses import dataclass

    from totalrecall.importers.jsonl import JsonlImporter
    from totalrecall_schema import MemoryEvent

    @dataclass(frozen=True)
    class Skip:
        reason: str
        where: str = ""

    base = types.ModuleType("totalrecall.importers.base")
    base.Skip = Skip  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "totalrecall.importers.base", base)
    f = tmp_path / "x.jsonl"
    f.write_text(json.dumps({"id": "a", "summary": "s", "namespace": "n"}) + "\nnot json\n")
    opts = types.SimpleNamespace(namespace="moved", since=None)
    items = list(JsonlImporter().read([f], opts))
    assert isinstance(items[0], MemoryEvent) and items[0].namespace == "moved"
    assert isinstance(items[1], Skip) and items[1].where == f"{f}:2"
    assert JsonlImporter.name == "jsonl"
