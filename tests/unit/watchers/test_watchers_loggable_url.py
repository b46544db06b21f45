"""The watchers log the NATS URL they connected to, never the credentials compose puts in it;
the URL may list a cluster's servers; a remote host publishes on its own subjects."""

from __future__ import annotations

from pathlib import Path

from totalrecall_schema import Topology
from totalrecall_watchers.adapters.publisher import NatsPublisher, connect_options, loggable_url


def test_credentials_are_dropped_from_the_logged_url() -> None:
    assert loggable_url("nats://totalrecall:s3cret@nats:4222") == "nats://nats:4222"
    assert loggable_url("nats://token@127.0.0.1:4222") == "nats://127.0.0.1:4222"


def test_every_server_of_a_list_loses_its_credentials() -> None:
    url = "nats://u:p1@a:4222,nats://u:p2@b:4222"
    assert loggable_url(url) == "nats://a:4222,nats://b:4222"


def test_a_url_without_credentials_is_unchanged() -> None:
    assert loggable_url("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"


def test_connect_options_take_the_credentials_out_of_a_cluster_list() -> None:
    url = "nats://host-a:p%40ss@n1:4222, nats://host-a:p%40ss@n2:4222,nats://n3:4222"
    assert connect_options(url) == {
        "servers": ["nats://n1:4222", "nats://n2:4222", "nats://n3:4222"],
        "user": "host-a", "password": "p@ss"}
    assert connect_options("nats://tok@n1:4222") == {"servers": ["nats://n1:4222"],
                                                     "token": "tok"}
    assert connect_options("nats://127.0.0.1:4222") == {"servers": ["nats://127.0.0.1:4222"]}


def test_a_remote_host_publishes_on_its_own_subjects(tmp_path: Path) -> None:
    topo = Topology.for_test("pub")
    local = NatsPublisher(nats_url="nats://127.0.0.1:1", topology=topo, spool=tmp_path)
    remote = NatsPublisher(nats_url="nats://a:s3cret@127.0.0.1:1", topology=topo,
                           spool=tmp_path, as_host="db-01.lan")
    assert local.subject("error") == topo.events_subject("error")
    assert remote.subject("error") == topo.host_events_subject("db-01.lan", "error")
    assert remote.health()["subjects"] == topo.host_events_subject("db-01.lan", "<category>")
    assert "s3cret" not in str(remote.health())
