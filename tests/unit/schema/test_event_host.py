"""The host an event happened on: filled in where the event is first built, kept when given,
read back from payloads written before hosts were kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from totalrecall_schema import MemoryEvent, RecallRequest
from totalrecall_schema import host as host_mod
from totalrecall_schema.host import local_host, normalize_hostname

from tests.unit.host_helpers import local_host_as

HERE_ID = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process runs on `Here-01` (mixed case: stored lowercased) with a known machine id."""
    with local_host_as(monkeypatch, "Here-01", HERE_ID):
        yield


def test_an_event_without_a_host_gets_the_local_one(here: None) -> None:
    ev = MemoryEvent(summary="disk full")
    assert (ev.metadata.host, ev.metadata.machine_id) == ("here-01", HERE_ID)
    assert ev.host == "here-01"


def test_a_payload_written_before_hosts_were_kept_is_valid_and_local(here: None) -> None:
    old = {"id": "e1", "namespace": "default", "category": "system.service",
           "subcategory": "general", "actor": "system", "source": "journal",
           "timestamp": "2026-01-02T03:04:05Z", "summary": "nginx failed", "detail": "",
           "metadata": {"severity": "error", "service": "nginx", "tags": []}}
    ev = MemoryEvent.model_validate(old)
    assert ev.metadata.host == "here-01" and ev.metadata.machine_id == HERE_ID
    assert ev.key == MemoryEvent.model_validate({**old, "metadata": {}}).key  # key: no host


def test_a_named_host_is_kept_normalised_and_not_given_this_machines_id(here: None) -> None:
    ev = MemoryEvent(summary="x", metadata={"host": " DB-01.Example.COM. "})
    assert ev.metadata.host == "db-01.example.com"
    assert ev.metadata.machine_id is None  # another machine: its id is not ours
    own = MemoryEvent(summary="x", metadata={"host": "HERE-01"})
    assert own.metadata.machine_id == HERE_ID  # named by its own name: this machine
    given = MemoryEvent(summary="x", metadata={"host": "db-01", "machine_id": "f" * 32})
    assert given.metadata.machine_id == "f" * 32


def test_a_structured_host_a_client_stored_before_is_kept_as_it_was(here: None) -> None:
    """Metadata was free-form: a `host` object stays (exports are lossless), named by its name."""
    given = {"name": "WS-1", "ips": ["10.0.0.7"]}
    ev = MemoryEvent(summary="x", metadata={"host": given})
    assert ev.metadata.host == given and ev.host == "ws-1"
    assert MemoryEvent.model_validate_json(ev.model_dump_json()).metadata.host == given
    nameless = MemoryEvent(summary="x", metadata={"host": {"ips": ["10.0.0.8"]}})
    assert nameless.metadata.host == {"ips": ["10.0.0.8"]} and nameless.host is None


def test_a_blank_host_is_no_host(here: None) -> None:
    assert MemoryEvent(summary="x", metadata={"host": "  "}).host == "here-01"


def test_a_machine_id_alone_names_that_machine(here: None) -> None:
    ev = MemoryEvent(summary="x", metadata={"machine_id": "ab" * 16})
    assert ev.metadata.host == "machine-abababababab" and ev.metadata.machine_id == "ab" * 16


def test_the_host_survives_a_json_round_trip(here: None) -> None:
    ev = MemoryEvent(summary="x", metadata={"host": "web-02", "service": "nginx"})
    back = MemoryEvent.model_validate_json(ev.model_dump_json())
    assert back.metadata.host == "web-02" and back.metadata.machine_id is None
    assert back.model_dump() == ev.model_dump()


def test_machine_id_from_the_system_else_generated_once_and_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOTALRECALL_MACHINE_ID", raising=False)
    monkeypatch.setenv("TOTALRECALL_HOSTNAME", "box")
    system = tmp_path / "etc-machine-id"
    system.write_text("FEDCBA9876543210FEDCBA9876543210\n")
    monkeypatch.setattr(host_mod, "_SYSTEM_MACHINE_ID", system)
    host_mod._resolve.cache_clear()
    try:
        assert local_host(tmp_path / "home").machine_id == "fedcba9876543210fedcba9876543210"
        assert not (tmp_path / "home" / "machine-id").exists()

        monkeypatch.setattr(host_mod, "_SYSTEM_MACHINE_ID", tmp_path / "absent")
        host_mod._resolve.cache_clear()
        home = tmp_path / "home"
        assert local_host(home).machine_id is None and not home.exists()  # no home: no id
        home.mkdir()
        host_mod._resolve.cache_clear()
        first = local_host(home).machine_id
        assert first is not None and len(first) == 32
        assert (home / "machine-id").read_text().strip() == first
        host_mod._resolve.cache_clear()  # a new process reads the kept id, not a new one
        assert local_host(home).machine_id == first
        other = tmp_path / "other-home"
        other.mkdir()
        host_mod._resolve.cache_clear()
        assert local_host(other).machine_id != first  # another installation, another id
    finally:
        host_mod._resolve.cache_clear()


def test_normalize_hostname() -> None:
    assert normalize_hostname("  Web-01.LAN. ") == "web-01.lan"
    assert normalize_hostname("") == ""


def test_recall_request_host_filter() -> None:
    assert RecallRequest(query="q").host_filter() is None
    req = RecallRequest(query="q", host="DB-01", hosts=["web-02", "db-01"])
    assert req.host_filter() == frozenset({"db-01", "web-02"})
    assert RecallRequest(query="q", hosts=["Web-02."]).host_filter() == frozenset({"web-02"})
    with pytest.raises(ValueError):
        RecallRequest(query="q", host="")
