"""The hash-chained ledger: chain, tamper detection, torn lines, concurrent writers, the CLI."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest
from totalrecall.main import main as cli_main
from totalrecall_schema.ledger import (
    GENESIS_HASH,
    LedgerAppend,
    LedgerBroken,
    LedgerFile,
    entry_hash,
    memory_event,
    verify_file,
)


def write(path: Path, n: int) -> LedgerFile:
    ledger = LedgerFile(path)
    for i in range(n):
        ledger.append(LedgerAppend(action="command.run", target=f"systemctl restart unit{i}",
                                   detail=f"exit 0 after {i} s"))
    return ledger


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def test_chain_links_every_entry_to_the_previous(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    write(path, 5)
    entries = [json.loads(line) for line in lines(path)]
    assert [e["seq"] for e in entries] == [1, 2, 3, 4, 5]
    assert entries[0]["prev_hash"] == GENESIS_HASH
    for prev, e in itertools.pairwise(entries):
        assert e["prev_hash"] == prev["hash"]
    assert all(entry_hash(e) == e["hash"] for e in entries)
    v = verify_file(path)
    assert v.ok and v.entries == 5 and v.last_seq == 5 and v.last_hash == entries[-1]["hash"]


def test_a_missing_ledger_is_empty_and_valid(tmp_path: Path) -> None:
    v = verify_file(tmp_path / "none.jsonl")
    assert v.ok and v.entries == 0 and v.last_hash == GENESIS_HASH


def test_secrets_are_scrubbed_before_hashing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    e = LedgerFile(path).append(LedgerAppend(
        action="command.run", target="mysql -u root --password=hunter22secret",
        detail="export AWS_SECRET_ACCESS_KEY=AKIAabcdefghijklmnop1234"))
    text = path.read_text()
    assert "hunter22secret" not in text and "AKIAabcdefghijklmnop1234" not in text
    assert "[REDACTED]" in e["target"] and verify_file(path).ok


def test_an_edited_entry_breaks_the_chain_there(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    write(path, 4)
    ls = lines(path)
    ls[2] = ls[2].replace("unit2", "unitX")
    path.write_text("".join(ls))
    v = verify_file(path)
    assert not v.ok and v.entries == 2 and v.first_break is not None
    assert v.first_break.seq == 3 and v.first_break.line == 3 and "edited" in v.first_break.reason


def test_an_edit_with_a_recomputed_hash_breaks_the_next_link(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    write(path, 4)
    ls = lines(path)
    forged = json.loads(ls[1])
    forged["detail"] = "nothing happened"
    forged["hash"] = entry_hash(forged)
    ls[1] = json.dumps(forged) + "\n"
    path.write_text("".join(ls))
    b = verify_file(path).first_break
    assert b is not None and b.seq == 3 and "prev_hash" in b.reason


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda ls: ls[:1] + ls[2:], "seq 3 where 2 was expected (deleted or reordered)"),
    (lambda ls: [ls[0], ls[2], ls[1], ls[3]], "seq 3 where 2 was expected"),
], ids=["deleted", "reordered"])
def test_deleted_or_reordered_entries_are_found(tmp_path: Path, edit: Any, reason: str) -> None:
    path = tmp_path / "ledger.jsonl"
    write(path, 4)
    path.write_text("".join(edit(lines(path))))
    b = verify_file(path).first_break
    assert b is not None and b.seq == 2 and reason in b.reason


def test_a_torn_last_line_is_reported_and_not_continued(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = write(path, 3)
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"seq":4,"ts":"2026-')  # a crash in the middle of a write
    v = verify_file(path)
    assert not v.ok and v.entries == 3
    assert v.first_break is not None and v.first_break.seq == 4 and "torn" in v.first_break.reason
    with pytest.raises(LedgerBroken, match="torn"):
        ledger.append(LedgerAppend(action="command.run"))
    assert path.read_bytes() == whole + b'{"seq":4,"ts":"2026-'  # nothing written after it


def test_append_refuses_an_edited_last_entry(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = write(path, 2)
    path.write_text(path.read_text().replace("unit1", "unitX"))
    with pytest.raises(LedgerBroken, match="broken chain"):
        ledger.append(LedgerAppend(action="command.run"))


def test_threads_appending_at_once_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    threads = [threading.Thread(target=write, args=(path, 25)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    v = verify_file(path)
    assert v.ok and v.entries == 200 and v.last_seq == 200


def _append_in_process(path: str, n: int) -> None:
    write(Path(path), n)


def test_processes_appending_at_once_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_in_process, args=(str(path), 20)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    v = verify_file(path)
    assert v.ok and v.entries == 80


def test_read_since(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = write(path, 5)
    assert [e["seq"] for e in ledger.read(3)] == [4, 5]
    assert [e["seq"] for e in ledger.read(0, limit=2)] == [1, 2]


def test_an_entry_becomes_an_agent_action_memory(tmp_path: Path) -> None:
    e = LedgerFile(tmp_path / "l.jsonl").append(LedgerAppend(
        action="service.restart", target="nginx.service", detail="after editing nginx.conf"))
    m = memory_event(e, "default")
    assert m.category == "agent.action" and m.subcategory == "service.restart"
    assert m.summary == "agent service.restart: nginx.service" and m.source == "ledger"
    assert m.id == memory_event(e).id  # same entry, same memory (idempotent republish)
    assert m.model_dump()["metadata"]["ledger_hash"] == e["hash"]


def test_cli_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ledger.jsonl"
    write(path, 3)
    assert cli_main(["ledger", "verify", "--path", str(path)]) == 0
    assert "ok: 3 entries" in capsys.readouterr().out
    path.write_text(path.read_text().replace("unit1", "unitX"))
    assert cli_main(["ledger", "verify", "--path", str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["first_bad_seq"] == 2 and out["entries"] == 1
    assert cli_main(["ledger", "verify", "--path", str(path)]) == 1
    assert "BROKEN at seq 2" in capsys.readouterr().out


def test_cli_verify_default_path_is_in_the_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TOTALRECALL_HOME", str(tmp_path))
    monkeypatch.delenv("TR_RECALL_LEDGER_PATH", raising=False)
    write(tmp_path / "ledger.jsonl", 2)
    assert cli_main(["ledger", "verify", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 2
