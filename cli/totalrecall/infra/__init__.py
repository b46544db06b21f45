"""Launchers for the real infrastructure the stack needs (nats-server, Postgres)."""

from .nats_server import NatsServer
from .ports import free_port, free_ports, http_ok
from .postgres import PostgresServer

__all__ = ["NatsServer", "PostgresServer", "free_port", "free_ports", "http_ok"]
