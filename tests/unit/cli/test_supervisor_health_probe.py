"""The supervisor's health probe on a port that does not speak HTTP: unhealthy, not a crash."""

from __future__ import annotations

import socket
import threading

from totalrecall.infra import http_ok


def test_a_port_answering_with_nats_info_is_unhealthy_not_an_error() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]

        def answer() -> None:  # as nats-server greets every client
            conn, _ = srv.accept()
            with conn:
                conn.sendall(b'INFO {"server_id":"x","version":"2.15.1"} \r\n')

        t = threading.Thread(target=answer)
        t.start()
        assert http_ok(f"http://127.0.0.1:{port}/health") is False
        t.join(5)
