"""A corpus of realistic secrets: none may survive into an event."""

import random

import pytest
from totalrecall_schema import REDACTED, MemoryEvent, scrub, scrub_text

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
    # Found by tests/chaos/test_secrets_corpus.py (they reached Markdown, Postgres, JetStream):
    ("alert to https://hooks.slack.com/services/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",
     "q1w2e3r4t5y6u7i8o9p0a1s2"),
    ("using key rk_live_51HqLyjWDarjtT1zdp7dc for payouts", "rk_live_51HqLyjWDarjtT1zdp7dc"),
    ("charge with sk_test_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("docker login -u bob -p kOEIQ0wGXO8ByOTWMK registry.io", "kOEIQ0wGXO8ByOTWMK"),
    ("curl -u admin:Zx9vB2nM4qW7eR1t https://ci.local/api", "Zx9vB2nM4qW7eR1t"),
    ("curl --user=admin:Zx9vB2nM4qW7eR1t https://ci.local/api", "Zx9vB2nM4qW7eR1t"),
    ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=WlkP2eLz6LAqDInnD0Lw/S+Dh==;"
     "EndpointSuffix=core.windows.net", "WlkP2eLz6LAqDInnD0Lw"),
    ("SENDGRID=SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
     "abcdefghijklmnopqrstuvwxyz0123456789"),
    # Found by the generated corpus (tests/chaos/secrets_gen.py): these survived scrub_text.
    ("aws configure set aws_access_key_id ASIAEDQMEVXRVCQURTAE", "ASIAEDQMEVXRVCQURTAE"),
    ('{"msg": "\\"SecretAccessKey\\": \\"48mP73hhatU2F9+JozYcUXc5uRjHaMWW1Rr8c1UM\\""}',
     "48mP73hhatU2F9"),
    ("maps key AIzajSbFdRHNaDK5Ne_JlqkVfQLGzG8OksvkAK-", "AIzajSbFdRHNaDK5Ne"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nNqcxjOZuDc8dqbY7lNiJ2TJHaNPSCI\n"
     "-----END PGP PRIVATE KEY BLOCK-----", "NqcxjOZuDc8dqbY7lNiJ2TJHaNPSCI"),
    ("request headers: {'Authorization': 'Basic YWRtaW46M2hMY3lsNUY4RC94TlQ1MVk3aVUwOVYr'}",
     "YWRtaW46M2hMY3lsNUY4RC94"),
    ("--client-secret=5D(Y7j^I_5Kj3MEc(gdZ,quY*zWXd#_K", "quY*zWXd#_K"),
    ("PGPASSWORD=4tW^,iVoaSD..NtooF8ATRhxg9= psql -h db", "iVoaSD..NtooF8ATRhxg9"),
    ("curl -u deploy:P@ss40sjZI7t https://registry.example.com/api", "ss40sjZI7t"),
    ("echo 'P@ss2fkiwJJd' | sudo -S apt-get install -y nginx", "P@ss2fkiwJJd"),
    ("redis-cli -h cache -a Oy6$^usU!sPX2nx ping", "Oy6$^usU!sPX2nx"),
    ("master_key=Wjc6ssWMUnws4lkN1QwJYNjgYmy2XA96PL0nBENt9g7k", "Wjc6ssWMUnws4lkN1Qw"),
    ('{"webhook_key": "w47GHYYTbHpVNc4SVGphdXBBxjw7usfKkTmtlKls27q3"}', "w47GHYYTbHpVNc4"),
    ("WARN --session-id otVOFqRgFYwlOyldLxIZZlcK", "otVOFqRgFYwlOyldLxIZZlcK"),
    ("pwd: gw4RORvF3wLr6Lu,,glFQpP)Xil", "glFQpP)Xil"),
    ("--api-key ,,2%ixVBd$7),aAsqRYK$xQxkd_86rnG", "aAsqRYK$xQxkd_86rnG"),
    ("export DJANGO_KEY=PQXkVyfcMWYcLJIeeNzJcXgnKftqVebWcIdunsaEGFuaOdVaWI", "PQXkVyfcMWYcLJIee"),
]


@pytest.mark.parametrize("text", ["mkdir -p build/out", "ssh -p 2222 host", "ps -u root",
                                  "curl -u user https://x"])
def test_flags_that_are_not_passwords_are_kept(text: str) -> None:
    assert scrub_text(text) == text


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


@pytest.mark.parametrize("text", [
    "indexer by the end of the row, although it is dropped once the hot tier passes 20,000 memories",
    "primary_key = id, sort_key = created_at", "cache key 3fa9c1d2e4b5a697 evicted",
    '"idempotencyKey":"a3f6cd71-94d0-4f2f-95c8-3ec9f00257f4"', "secrets: 32; channels: 6",
    '\\"totalTokens\\":13,\\"cost\\":1', "license_key = see-the-wiki-page-for-it"])
def test_ordinary_assignments_are_kept(text: str) -> None:
    """Look-alikes of the rules the generated corpus added: a number after a word, an id
    under a key's name, a word-only value."""
    assert scrub_text(text) == text


# Scrubbing skips a pattern when the text lacks a literal every match contains: the result must
# be what running every pattern gives, whatever the text (tricky case folding included).

#: Pieces of texts: every rule's literals, in several cases, the characters around them, and
#: non-ASCII letters that fold to ASCII ones under IGNORECASE (Kelvin sign, long s, dotted I).
PIECES = [
    "-----BEGIN ", "RSA ", "PRIVATE KEY-----", "-----END ", "\n", " ", "  ", "\t", "=", ": ", ":",
    "@", "://", "postgres", "https", "user", "/", "Authorization", "AUTHORIZATION", "bearer",
    "Bearer ", "BEARER", "AKIA", "IOSFODNN7EXAMPLE", "ghp_", "gho_", "github_pat_", "xoxb-",
    "xox", "sk-", "sk-proj-", "AIza", "glpat-", "npm_", "sk_live_", "rk_test_", "whsec_", "SG.",
    "hooks.slack.com/", "services/", "HOOKS.SLACK.COM/", "discord", "Discordapp", ".com",
    "/api/webhooks/", "eyJ", ".eyJ", ".", "password", "PASSWD", "passphrase", "pwd", "secret",
    "client_secret", "token", "TOKEN", "api_key", "apikey", "access-key", "auth_key",
    "private_key", "credentials", "session_id", "cookie", "account_key", "shared_access_key",
    "-p", "-pS3cr3t", "sshpass", "login", " -p ", " -u ", "--user=", "--user ", "admin:",
    "hunter2", "S3cr3tPass!", "abcdefghijklmnopqrstuvwxyz0123456789", "0123456789abcdef",
    "AIzaSyA1234567890abcdefghijklmnopqrstu", "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "discord.com", "discordapp.com", "123/abc_def-ghi", "'", '"', "x", "db", "K", "ASIA",
    " BLOCK-----", "\\", '\\"', "master_key", "signingKey", "Wjc6ssWMUnws4lkN1QwJYNjg", ",",
    ";", "&", "echo ", "printf ", " | sudo -S ", "redis-cli", " -a ", "-", "ſ", "İ", "é", "ﬁ", "paſsword", "toKen", "[REDACTED]",
]


def _every_pattern(text: str) -> str:
    """The reference: every rule's pattern, in order, without the literal check."""
    if not text:
        return text
    for rule in scrub._RULES:
        text = rule.pattern.sub(rule.repl, text)  # type: ignore[arg-type]
    return text


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 14))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(4))
def test_same_as_every_pattern_on_random_texts(seed: int) -> None:
    for text in _texts(1500, seed):
        assert scrub_text(text) == _every_pattern(text), text


#: Matches the random texts are unlikely to assemble.
WHOLE = ["post to https://discord.com/api/webhooks/1234567/AbC_dEf-123 failed",
         "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N in log"]


@pytest.mark.parametrize("text", [text for text, _secret in SECRETS] + WHOLE)
def test_same_as_every_pattern_on_the_secrets(text: str) -> None:
    for variant in (text, text.upper(), text.lower(), f"é {text}", text.replace("s", "ſ")):
        assert scrub_text(variant) == _every_pattern(variant)


def test_every_rule_lists_literals() -> None:
    for rule in scrub._RULES:
        assert rule.needs and all(rule.needs)
        if rule.ci:
            assert all(lit == lit.lower() for group in rule.needs for lit in group)
