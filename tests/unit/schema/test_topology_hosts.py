"""Host-scoped event subjects, the host token, the publisher check and the replica count."""

from __future__ import annotations

from pathlib import Path

import pytest
from totalrecall_embedder.settings import Settings as EmbedderSettings
from totalrecall_schema import Topology
from totalrecall_schema.host import check_publisher_host
from totalrecall_schema.topology import host_from_token, host_token
from totalrecall_watchers.settings import Settings as WatchersSettings

TOPO = Topology()


@pytest.mark.parametrize("host, token", [
    ("db-01", "db-01"),
    ("DB-01.Example.COM.", "db-01_example_com"),   # normalised: case, the root dot
    ("a_b", "a%5Fb"),                               # `_` never stands for itself
    ("a.b", "a_b"),
    ("x*y>z", "x%2Ay%3Ez"),                         # no wildcard reaches a subject
    ("ünï", "%C3%BCn%C3%AF"),
])
def test_host_token_is_one_subject_token_and_round_trips(host: str, token: str) -> None:
    assert host_token(host) == token
    assert not set(token) & set(". *>\t")
    assert host_from_token(token) == host.strip().rstrip(".").lower()


def test_host_tokens_are_injective() -> None:
    names = ["a.b", "a_b", "a-b", "a%5fb", "a.b.", "ab", "a__b", "a._b", "a_.b"]
    tokens = {host_token(n) for n in names}
    assert len(tokens) == len({n.rstrip(".") for n in names})


@pytest.mark.parametrize("bad", ["", "  ", "."])
def test_no_token_without_a_hostname(bad: str) -> None:
    with pytest.raises(ValueError):
        host_token(bad)


@pytest.mark.parametrize("bad", ["", "A", "a.b", "a%", "a%zz", "a%2a", "a b",
                                 "%61", "a%2Eb", "a%41", "a%FF", "a_"])
def test_only_tokens_host_token_makes_decode(bad: str) -> None:
    with pytest.raises(ValueError):
        host_from_token(bad)


def test_host_scoped_subjects() -> None:
    assert TOPO.host_events_subject("db-01.lan", "system.service") == \
        "memory.host.db-01_lan.events.system.service"
    assert TOPO.host_events_of("db-01.lan") == "memory.host.db-01_lan.events.>"
    assert TOPO.host_events_all == "memory.host.*.events.>"
    assert TOPO.event_subjects == ["memory.events.>", "memory.host.*.events.>"]
    # the local form is unchanged
    assert TOPO.events_subject("system.service") == "memory.events.system.service"
    assert TOPO.host_inbox_prefix("db-01.lan") == "_INBOX.memory.host.db-01_lan"
    test = Topology.for_test("abc")
    assert test.host_events_subject("h", "file") == "tabc.host.h.events.file"


@pytest.mark.parametrize("subject, host", [
    ("memory.host.db-01_lan.events.system.service", "db-01.lan"),
    ("memory.host.a%5Fb.events.file", "a_b"),
    ("memory.events.system.service", None),
    ("memory.events.host.x.events.file", None),     # a category, not a host
    ("memory.host.x.embedded.file", None),
    ("memory.host.x.events", None),
    ("other.host.x.events.file", None),
])
def test_host_of_subject(subject: str, host: str | None) -> None:
    assert TOPO.host_of_subject(subject) == host


def test_host_of_subject_with_a_dotted_prefix() -> None:
    topo = Topology(prefix="site.memory")
    subject = topo.host_events_subject("ws-1", "file")
    assert subject == "site.memory.host.ws-1.events.file"
    assert topo.host_of_subject(subject) == "ws-1"
    assert topo.host_of_subject("memory.host.ws-1.events.file") is None


def test_a_malformed_host_token_is_an_error() -> None:
    with pytest.raises(ValueError):
        TOPO.host_of_subject("memory.host.A%zz.events.file")


def test_publisher_check_fills_a_missing_host_in() -> None:
    event: dict[str, object] = {"summary": "x"}
    assert check_publisher_host("db-01", event) is None
    assert event["metadata"] == {"host": "db-01"}
    event = {"summary": "x", "metadata": {"severity": "error", "host": None}}
    assert check_publisher_host("DB-01", event) is None
    assert event["metadata"] == {"severity": "error", "host": "db-01"}


@pytest.mark.parametrize("claimed", ["db-01", "DB-01.", {"name": "db-01", "ips": ["10.0.0.1"]}])
def test_publisher_check_accepts_its_own_events(claimed: object) -> None:
    assert check_publisher_host("db-01", {"metadata": {"host": claimed}}) is None


def test_publisher_check_refuses_another_hosts_events() -> None:
    assert check_publisher_host("a", {"metadata": {"host": "b"}}) == \
        "host a may not publish events of host b"
    reason = check_publisher_host("a", {"metadata": {"host": {"ips": ["10.0.0.2"]}}})
    assert reason is not None and reason.startswith("host a may not publish events of an unnamed")
    reason = check_publisher_host("a", {"metadata": ["host", "a"]})
    assert reason is not None and "not an object" in reason


def test_replicas_default_to_one_and_are_bounded() -> None:
    assert Topology().replicas == 1 and TOPO.stream_configs()[0].num_replicas == 1
    assert {c.num_replicas for c in Topology(replicas=3).stream_configs()} == {3}
    for bad in (0, 6):
        with pytest.raises(ValueError):
            Topology(replicas=bad)


def test_the_events_stream_captures_both_forms() -> None:
    cfg = {c.name: c for c in TOPO.stream_configs()}
    assert cfg["MEMORY_EVENTS"].subjects == ["memory.events.>", "memory.host.*.events.>"]
    assert cfg["MEMORY_EMBEDDED"].subjects == ["memory.embedded.>"]


def test_every_service_reads_tr_nats_replicas(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.setenv("TOTALRECALL_HOME", str(tmp_path))
    monkeypatch.delenv("TR_NATS_REPLICAS", raising=False)
    assert EmbedderSettings().topology.replicas == 1
    monkeypatch.setenv("TR_NATS_REPLICAS", "3")
    assert EmbedderSettings().topology == Topology(replicas=3)
    assert WatchersSettings().topology.replicas == 3
    monkeypatch.setenv("TR_EMBEDDER_NATS_REPLICAS", "1")   # one service's own wins
    assert EmbedderSettings().topology.replicas == 1
    monkeypatch.setenv("TR_NATS_REPLICAS", "7")
    with pytest.raises(ValueError):
        WatchersSettings()


def test_nats_url_may_list_a_clusters_nodes() -> None:
    s = EmbedderSettings(nats_url="nats://u:p@n1:4222, nats://u:p@n2:4222,")
    assert s.nats_servers == ["nats://u:p@n1:4222", "nats://u:p@n2:4222"]
    assert EmbedderSettings().nats_servers == ["nats://127.0.0.1:4222"]
