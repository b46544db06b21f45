"""The watchers log the NATS URL they connected to, never the credentials compose puts in it."""

from __future__ import annotations

from totalrecall_watchers.publisher import loggable_url


def test_credentials_are_dropped_from_the_logged_url() -> None:
    assert loggable_url("nats://totalrecall:s3cret@nats:4222") == "nats://nats:4222"
    assert loggable_url("nats://token@127.0.0.1:4222") == "nats://127.0.0.1:4222"


def test_every_server_of_a_list_loses_its_credentials() -> None:
    url = "nats://u:p1@a:4222,nats://u:p2@b:4222"
    assert loggable_url(url) == "nats://a:4222,nats://b:4222"


def test_a_url_without_credentials_is_unchanged() -> None:
    assert loggable_url("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"
