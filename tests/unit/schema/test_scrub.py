"""A corpus of realistic secrets: none may survive into an event."""

import pytest
from totalrecall_schema import REDACTED, MemoryEvent, scrub_text

SECRETS = [
    ("mysql -u root -pS3cr3tPass! db", "S3cr3tPass!"),
    ("psql postgresql://app:hunter2@db.internal:5432/prod", "hunter2"),
    ("curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijk'",
     "eyJzdWIiOiIxMjM0NTY3ODkwIn0"),
    ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("aws key AKIAIOSFODNN7EXAMPLE used", "AKIAIOSFODNN7EXAMPLE"),
    ("git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/x/y", "ghp_abcdef"),
    ("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz123456", "sk-proj-abcdef"),
    ("app --password hunter22 --verbose", "hunter22"),
    ("db_password: 'correct horse'", "correct"),
    ('{"client_secret": "abc123xyz"}', "abc123xyz"),
    ("redis://:p4ssw0rd@localhost:6379/0", "p4ssw0rd"),
    ("sshpass -p letmein ssh host", "letmein"),
    ("token=xoxb-123456789012-abcdefghijkl", "xoxb-123456789012"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----",
     "b3BlbnNzaC1rZXktdjEAAAA"),
    ("/home/u/.config/app?api_key=ZXY98765abc", "ZXY98765abc"),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_secret_is_scrubbed(text: str, secret: str) -> None:
    out = scrub_text(text)
    assert secret not in out
    assert REDACTED in out


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_events_never_carry_secrets(text: str, secret: str) -> None:
    e = MemoryEvent(summary=text, detail=text, metadata={"path": text, "cmd": text, "tags": ["t"]})
    assert secret not in e.model_dump_json()


def test_plain_prose_is_kept() -> None:
    text = "The token expired and the password prompt appeared; nginx restarted"
    assert scrub_text(text) == text
