"""Secret scrubbing: applied to every event before it is published or persisted.

The patterns err on the side of redaction: a false positive loses a few characters of a memory,
a false negative leaks a credential into four stores.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

REDACTED = "[REDACTED]"

_KEY_WORDS = (
    r"pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth[_-]?key"
    r"|private[_-]?key|client[_-]?secret|credentials?|bearer|session[_-]?id|cookie"
    r"|account[_-]?key|shared[_-]?access[_-]?key"
)

_PATTERNS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # PEM private keys (whole block, even when truncated at the end of the text).
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.S,
        ),
        REDACTED,
    ),
    # user:password@ in URLs and connection strings.
    (re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^\s:/@]*):(?P<pw>[^\s@/]+)@"),
     r"\g<scheme>\g<user>:" + REDACTED + "@"),
    # Authorization headers.
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?:bearer|basic|token)?\s*[A-Za-z0-9._~+/=-]{8,}"),
     r"\1" + REDACTED),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}"), "Bearer " + REDACTED),
    # Well-known token shapes.
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED),  # AWS access key id
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), REDACTED),  # GitHub
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}\b"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"), REDACTED),  # Slack
    (re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}\b"), REDACTED),  # OpenAI / Anthropic
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), REDACTED),  # Google
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b"), REDACTED),  # GitLab
    (re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), REDACTED),
    # Stripe secret and restricted keys, webhook signing secrets.
    (re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b"), REDACTED),
    (re.compile(r"\bwhsec_[A-Za-z0-9]{24,}\b"), REDACTED),
    (re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), REDACTED),  # SendGrid
    # Incoming-webhook URLs: the path is the credential (Slack, Discord).
    (re.compile(r"(?i)(\bhooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_/-]+"),
     r"\1" + REDACTED),
    (re.compile(r"(?i)(\bdiscord(?:app)?\.com/api/webhooks/)[A-Za-z0-9_/-]+"), r"\1" + REDACTED),
    # JWT
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b"), REDACTED),
    # key=value, key: value, --key value, "key": "value", KEY="value" (env, CLI flags, JSON).
    (
        re.compile(
            r"(?i)(?P<k>(?:--?|\b)[A-Za-z0-9_.-]*(?:" + _KEY_WORDS + r")[A-Za-z0-9_.-]*)"
            r"(?P<kq>[\"']?)(?P<sep>\s*[:=]\s*|\s+)"
            r"(?:(?P<q>[\"'])(?P<qv>[^\"'\n]{1,200})(?P=q)|(?P<v>[^\s\"',;&]{3,}))"
        ),
        lambda m: _redact_kv(m),
    ),
    # mysql -pSECRET / sshpass -p SECRET
    (re.compile(r"(?<=\s)(-p)(?=[^\s-])\S{3,}"), r"\1" + REDACTED),
    (re.compile(r"(\bsshpass\s+-p\s*)\S+"), r"\1" + REDACTED),
    # `docker login -u bob -p SECRET` (podman, helm, … alike): -p after `login` is a password.
    (re.compile(r"(\blogin\b[^\n]*?\s-p\s+)[^\s-]\S*"), r"\1" + REDACTED),
    # `curl -u user:SECRET`, `--user user:SECRET`, `--user=user:SECRET`.
    (re.compile(r"((?:\s-u\s*|\s--user[=\s]\s*)[^\s:@]+:)[^\s@]+"), r"\1" + REDACTED),
]


def _redact_kv(m: re.Match[str]) -> str:
    head = f"{m.group('k')}{m.group('kq')}{m.group('sep')}"
    if m.group("q"):
        if not _looks_like_value(m.group("sep") or "=", m.group("qv")):
            return m.group(0)
        return f"{head}{m.group('q')}{REDACTED}{m.group('q')}"
    if not _looks_like_value(m.group("sep"), m.group("v")):
        return m.group(0)
    return f"{head}{REDACTED}"


def _looks_like_value(sep: str, value: str) -> bool:
    """For whitespace-separated `password foo` only redact when it reads like a credential."""
    if value == REDACTED or value.startswith("[REDACTED"):
        return False
    if sep.strip():  # explicit `=` or `:`
        return True
    # "--password hunter2" style: a flag followed by a value. Plain prose ("token expired") is kept
    # unless the word after it looks random enough to be a secret.
    return any(c.isdigit() for c in value) or (len(value) >= 12 and not value.isalpha())


def scrub_text(text: str) -> str:
    """Return `text` with every credential-looking substring replaced by ``[REDACTED]``."""
    if not text:
        return text
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)  # type: ignore[arg-type]
    return text


def scrub_value(value: Any) -> Any:
    """Scrub strings inside nested dicts/lists; keys that name a secret lose their value."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if isinstance(k, str) and re.search(_KEY_WORDS, k, re.I) and v not in (None, ""):
                out[k] = REDACTED
            else:
                out[k] = scrub_value(v)
        return out
    if isinstance(value, list):
        return [scrub_value(v) for v in value]
    return value
