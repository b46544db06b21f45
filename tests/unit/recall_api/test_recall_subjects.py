"""What a machine event is about (`core/subjects.py`): its subject, and the words of its name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from totalrecall_recall_api.core.subjects import name_parts, subject


@dataclass
class Row:
    category: str
    subcategory: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@pytest.mark.parametrize(("row", "expected"), [
    (Row("system.container", "oom", {"container_name": "cache-7f"}), ("container", "cache-7f")),
    (Row("system.container", "disk", {"engine": "podman"}), None),  # the engine's, no one's
    (Row("system.service", "fail", {"service": "backup.service"}), ("unit", "backup.service")),
    # the error line a unit logged (its cause) is the unit's too
    (Row("error", "application", {"service": "backup.service"}), ("unit", "backup.service")),
    (Row("error", "application", {}), None),
    # a log importer's line filed as a service's is no unit's lifecycle
    (Row("system.service", "", {"service": "sshd"}), None),
    (Row("file", "modify", {"path": "/etc/haproxy-prod.conf"}), ("file", "/etc/haproxy-prod.conf")),
    (Row("security", "sudo", {"user": "bob"}), ("account", "bob")),
    (Row("system.process", "high_cpu", {"pid": 3}), None),
    (Row("conversation", "turn", {"session": "s"}), None),
])
def test_the_subject_of_an_event(row: Row, expected: tuple[str, str] | None) -> None:
    assert subject(row) == expected


@pytest.mark.parametrize(("kind", "name", "parts"), [
    ("unit", "backup-x7.service", {"backup", "x7"}),  # the type suffix names no unit
    ("file", "/etc/nginx/nginx-prod.conf", {"nginx", "prod"}),  # the file's own name
    ("file", "/srv/data/dump", {"dump"}),
    ("container", "web_frontend-2", {"web", "frontend"}),  # numbers name nothing
    ("account", "bob", {"bob"}),
    ("container", "the-app", {"app"}),  # nor do stop words
])
def test_the_words_of_a_name(kind: str, name: str, parts: set[str]) -> None:
    assert name_parts(kind, name) == parts
