"""The verbs that talk to the recall API (a fake one): text for people, --json for scripts,
exit codes, and clear errors when the API is down."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from cli_fake_api import NOW, FakeApi, run_cli
from totalrecall import main as cli


def test_every_verb_is_listed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for verb in ("run", "status", "doctor", "timeline", "stats", "forget", "export",
                 "import-jsonl", "ingest", "recall", "rebuild", "model", "compact"):
        assert f"    {verb}" in out, verb


def test_forget_says_what_it_did(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.add(id="a", summary="the wifi password hint")
    api.add(id="a", namespace="ops", summary="same id elsewhere")
    code, out, _ = run_cli(capsys, "forget", "a")
    assert code == 0 and out == "Forgot 1 memory in namespace default.\n"
    assert api.bodies("/memory/forget") == [{"ids": ["a"], "namespace": "default"}]
    code, out, _ = run_cli(capsys, "forget", "a", "zz", "--namespace", "ops", "--json")
    assert code == 1  # some ids were found nowhere
    assert json.loads(out) == {"namespace": "ops", "forgotten": 1, "missing": ["zz"]}


def test_forget_takes_the_namespace_from_the_environment(
        api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOTALRECALL_NAMESPACE", "agent-7")
    code, out, _ = run_cli(capsys, "forget", "x")
    assert code == 1 and "Not found (nothing to forget): x" in out
    assert api.bodies("/memory/forget")[0]["namespace"] == "agent-7"


def test_api_down_is_exit_2_with_what_to_do(api: FakeApi,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    api.down = True
    code, out, err = run_cli(capsys, "forget", "a")
    assert code == 2 and out == ""
    assert "is not reachable" in err and "totalrecall run" in err
    code, out, _ = run_cli(capsys, "stats", "--json")
    assert code == 2 and "not reachable" in json.loads(out)["error"]


def test_a_refused_request_shows_the_servers_reason(api: FakeApi,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "forget", "not an id!")  # validated before it is sent
    assert code == 1 and "String should match pattern" in err
    assert api.requests == []


def test_timeline_stats_recall_and_ingest(api: FakeApi,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    api.add(id="n1", summary="nginx failed to bind port 80", category="system.service",
            timestamp=NOW, metadata={"severity": "error"})
    api.add(id="d1", summary="disk almost full", category="system.storage",
            timestamp=NOW + timedelta(minutes=5))
    code, out, _ = run_cli(capsys, "timeline", "--hours", "2")
    assert code == 0
    assert out.splitlines() == [
        "2026-11-25 09:30:00Z  system.service error  nginx failed to bind port 80  [n1]",
        "2026-11-25 09:35:00Z  system.storage  disk almost full  [d1]"]
    assert api.bodies("/memory/timeline")[0] == {"hours": 2.0, "namespace": "default",
                                                 "limit": 200}
    code, out, _ = run_cli(capsys, "timeline", "--namespace", "empty")
    assert out == "Nothing recorded in the last 24 hours.\n"

    code, out, _ = run_cli(capsys, "stats")
    assert code == 0 and out.startswith("Memories: 2 (all namespaces)")
    assert "by category: system.service 1 · system.storage 1" in out
    assert "Zvec documents: hot 2 · warm 0 · cold 0" in out
    code, out, _ = run_cli(capsys, "stats", "--namespace", "default", "--json")
    assert json.loads(out)["total"] == 2 and json.loads(out)["namespace"] == "default"

    code, out, _ = run_cli(capsys, "recall", "why did nginx fail")
    assert code == 0 and "nginx failed to bind port 80  [n1]" in out
    code, out, _ = run_cli(capsys, "recall", "nginx", "--block")
    assert out.startswith("<system_memory>")
    code, out, _ = run_cli(capsys, "recall", "bananas")
    assert out == "No matching memories.\n"
    run_cli(capsys, "recall", "nginx", "--host", "db-01", "--host", "web-02")
    assert api.bodies("/memory/recall")[-1]["hosts"] == ["db-01", "web-02"]
    assert "hosts" not in api.bodies("/memory/recall")[0]

    code, out, _ = run_cli(capsys, "ingest", "remember the milk", "--id", "milk", "--tag", "shop")
    assert code == 0 and out == "Stored: id milk\n"
    assert api.bodies("/memory/ingest")[0]["tags"] == ["shop"]
    code, out, _ = run_cli(capsys, "ingest", "remember the milk", "--id", "milk", "--json")
    assert json.loads(out)["duplicates"] == 1


def test_model_build_json_keeps_stdout_for_the_result(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: object) -> None:
    from totalrecall import model_build

    def fake_build(out: object, **kw: object) -> dict[str, object]:
        model_build.say("present and valid; nothing to do")
        return {"fingerprint": "all-MiniLM-L6-v2.q8_0:abc", "dim": 384}

    monkeypatch.setattr(model_build, "build", fake_build)
    code, out, err = run_cli(capsys, "model", "build", "--json", "--out", f"{tmp_path}/m.gguf")
    assert code == 0 and json.loads(out) == {"path": f"{tmp_path}/m.gguf", "dim": 384,
                                             "fingerprint": "all-MiniLM-L6-v2.q8_0:abc"}
    assert "nothing to do" in err
    code, out, _ = run_cli(capsys, "model", "build", "--print-fingerprint")
    assert out.splitlines()[-1] == "all-MiniLM-L6-v2.q8_0:abc"
