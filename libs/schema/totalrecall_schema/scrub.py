"""Secret scrubbing: applied to every event before it is published or persisted.

The patterns err on the side of redaction: a false positive loses a few characters of a memory,
a false negative leaks a credential into four stores.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

REDACTED = "[REDACTED]"

_KEY_WORDS = (
    r"pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth[_-]?key"
    r"|private[_-]?key|client[_-]?secret|credentials?|bearer|session[_-]?id|cookie"
    r"|account[_-]?key|shared[_-]?access[_-]?key"
)
#: Every word `_KEY_WORDS` matches contains one of these (lower case).
_KEY_STEMS = ("pass", "pwd", "secret", "token", "api", "access", "auth", "private",
              "credential", "bearer", "session", "cookie", "account", "shared")

Replacement = str | Callable[[re.Match[str]], str]

#: The end of a token whose alphabet includes '-' and '_' (`\b` fails after a trailing '-').
_END = r"(?![A-Za-z0-9_-])"
#: An unquoted value runs to whitespace or a quote. A ',' inside is part of it (generated
#: passwords hold them), a trailing one is not; ';' and '&' end it where the next `name=` starts
#: (`Password=a;Host=b` is two assignments, `password=a;b` one value) and before whitespace
#: (`secrets: 32; more`).
_UNQUOTED = r"(?:[^\s\"';&,\\]|,+(?=[^\s\"'\\,])|[;&](?![A-Za-z_][A-Za-z0-9_.-]*=|\s|$))"
#: key=value, key: value, --key value, "key": "value", KEY="value"; the quotes may be escaped
#: (JSON inside a JSON string).
_KV = re.compile(
    r"(?i)(?P<k>(?:--?|\b)[A-Za-z0-9_.-]*(?:" + _KEY_WORDS + r")[A-Za-z0-9_.-]*)"
    r"(?P<kq>\\?[\"']?)(?P<sep>\s*[:=]\s*|\s+)"
    r"(?:(?P<q>\\?[\"'])(?P<qv>[^\"'\n\\]{1,200})(?P=q)|(?P<v>" + _UNQUOTED + r"{3,}))"
)


class _Rule(NamedTuple):
    """One pattern and what it replaces a match with, plus the literals any match contains:
    `needs` is a tuple of groups, and a match contains one literal of every group. A text that
    lacks them cannot match, so the regular expression is not run (most texts contain none of
    them, and the scan is what scrubbing costs: every stage scrubs every event it parses).
    With `ci` the pattern ignores case and the literals are lower case: they are looked for in
    the lowered text when it is ASCII (else the pattern always runs: Unicode case folding can
    match a non-ASCII letter, such as the Kelvin sign, to an ASCII one)."""

    pattern: re.Pattern[str]
    repl: Replacement
    needs: tuple[tuple[str, ...], ...] = ()
    ci: bool = False


_RULES: list[_Rule] = [
    # PEM private keys and PGP armoured ones (`PRIVATE KEY BLOCK`): the whole block, even when
    # truncated at the end of the text.
    _Rule(
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
        REDACTED, (("-----BEGIN ",), ("PRIVATE KEY",)),
    ),
    # user:password@ in URLs and connection strings.
    _Rule(re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^\s:/@]*):(?P<pw>[^\s@/]+)@"),
          r"\g<scheme>\g<user>:" + REDACTED + "@", (("://",), ("@",))),
    # Authorization headers.
    # The name may be quoted, the quote escaped: a dict or a JSON dump of the headers.
    _Rule(re.compile(r"(?i)\b(authorization\\?[\"']?\s*[:=]\s*\\?[\"']?)(?:bearer|basic|token)?\s*"
                     r"[A-Za-z0-9._~+/=-]{8,}"),
          r"\1" + REDACTED, (("authorization",),), ci=True),
    _Rule(re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}"), "Bearer " + REDACTED,
          (("bearer",),), ci=True),
    # Well-known token shapes.
    _Rule(re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED,  # AWS key id (ASIA: STS)
          (("AKIA", "ASIA"),)),
    _Rule(re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), REDACTED,  # GitHub
          (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),)),
    _Rule(re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}\b"), REDACTED, (("github_pat_",),)),
    _Rule(re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"), REDACTED, (("xox",),)),  # Slack
    _Rule(re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}" + _END), REDACTED,  # OpenAI / Anthropic
          (("sk-",),)),
    _Rule(re.compile(r"\bAIza[0-9A-Za-z_-]{35}" + _END), REDACTED, (("AIza",),)),  # Google
    _Rule(re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}" + _END), REDACTED, (("glpat-",),)),  # GitLab
    _Rule(re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), REDACTED, (("npm_",),)),
    # Stripe secret and restricted keys, webhook signing secrets.
    _Rule(re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b"), REDACTED,
          (("sk_live_", "sk_test_", "rk_live_", "rk_test_"),)),
    _Rule(re.compile(r"\bwhsec_[A-Za-z0-9]{24,}\b"), REDACTED, (("whsec_",),)),
    _Rule(re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), REDACTED,  # SendGrid
          (("SG.",),)),
    # Incoming-webhook URLs: the path is the credential (Slack, Discord).
    _Rule(re.compile(r"(?i)(\bhooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_/-]+"),
          r"\1" + REDACTED, (("hooks.slack.com/",),), ci=True),
    _Rule(re.compile(r"(?i)(\bdiscord(?:app)?\.com/api/webhooks/)[A-Za-z0-9_/-]+"),
          r"\1" + REDACTED, (("discord",), ("/api/webhooks/",)), ci=True),
    # JWT
    _Rule(re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b"),
          REDACTED, (("eyJ",), (".eyJ",))),
    # key=value, key: value, --key value, "key": "value", KEY="value" (env, CLI flags, JSON).
    _Rule(_KV, lambda m: _redact_kv(m), (_KEY_STEMS,), ci=True),
    # A name that says only "key" (SIGNING_KEY, master_key, encryptionKey, app.hmac-key) given a
    # value that reads as generated: long, letters and digits mixed (`_high_entropy`).
    _Rule(
        re.compile(
            r"(?i)(?P<k>\b[A-Za-z0-9_.-]*key)(?P<kq>\\?[\"']?)(?P<sep>\s*[:=]\s*)"
            r"(?P<q>\\?[\"']?)(?P<v>[A-Za-z0-9+/=_-]{16,})(?![A-Za-z0-9+/=_-])"
        ),
        lambda m: (f"{m['k']}{m['kq']}{m['sep']}{m['q']}{REDACTED}" if _high_entropy(m["v"])
                   else m.group(0)), (("key",),), ci=True,
    ),
    # mysql -pSECRET / sshpass -p SECRET
    _Rule(re.compile(r"(?<=\s)(-p)(?=[^\s-])\S{3,}"), r"\1" + REDACTED, (("-p",),)),
    _Rule(re.compile(r"(\bsshpass\s+-p\s*)\S+"), r"\1" + REDACTED, (("sshpass",),)),
    # `docker login -u bob -p SECRET` (podman, helm, … alike): -p after `login` is a password.
    _Rule(re.compile(r"(\blogin\b[^\n]*?\s-p\s+)[^\s-]\S*"), r"\1" + REDACTED,
          (("login",), ("-p",))),
    # `curl -u user:SECRET`, `--user user:SECRET`, `--user=user:SECRET`.
    # (The password runs to whitespace: it may hold an '@'.)
    _Rule(re.compile(r"((?:\s-u\s*|\s--user[=\s]\s*)[^\s:@]+:)\S+"), r"\1" + REDACTED,
          (("-u",), (":",))),
    _Rule(re.compile(r"(\bredis-cli\b[^\n]*?\s-a\s+)\S+"), r"\1" + REDACTED,
          (("redis-cli",), ("-a",))),
    # echo SECRET | sudo -S / passwd --stdin / chpasswd / docker login --password-stdin …
    _Rule(re.compile(r"(\b(?:echo|printf)\s+(?:-\w+\s+)?)('[^']*'|\"[^\"]*\"|[^\s|;&]+)(?=\s*\|\s*"
                     r"(?:sudo\s+(?:-\w+\s+)*-\w*S|\S*passwd\b[^|\n]*--stdin|\S*chpasswd\b"
                     r"|\S*cryptsetup\b|\S+\s+login\b[^|\n]*--password-stdin|\S+[^|\n]*-pass\s+stdin))"),
          r"\1" + REDACTED, (("echo", "printf"), ("|",))),
]


_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def _high_entropy(value: str) -> bool:
    """A value that reads as generated (a key from `openssl rand`, a UUID-free token): 16+
    characters with letters and digits mixed and at least 3 bits of entropy per character, or
    24+ letters of both cases with at least 4 bits (a random key that drew no digit). Words
    (`created_at`), versions, paths and UUIDs (an idempotency or partition key is an id) are
    not."""
    if value.startswith("[REDACTED") or not any(c.isalpha() for c in value) \
            or _UUID.fullmatch(value):
        return False
    counts = Counter(value)
    bits = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    if any(c.isdigit() for c in value):
        return bits >= 3.0
    return len(value) >= 24 and value.lower() != value and value.upper() != value \
        and bits >= 4.0


def _redact_kv(m: re.Match[str]) -> str:
    head = f"{m.group('k')}{m.group('kq')}{m.group('sep')}"
    if m.group("q"):
        if not _looks_like_value(m.group("sep") or "=", m.group("qv")):
            return m.group(0)
        return f"{head}{m.group('q')}{REDACTED}{m.group('q')}"
    value, rest = m.group("v"), ""
    if not m.group("sep").strip() and not m.group("k").startswith("-") and "," in value:
        # `password foo,bar` in prose ("passes 20,000 memories"): a value after a bare word
        # ends at a comma; what follows is looked at again.
        value, rest = value.split(",", 1)
        rest = "," + _KV.sub(_redact_kv, rest)
        if len(value) < 3:
            return m.group("k") + m.group("kq") + m.group("sep") + value + rest
    # A flag's next word is its value (`--session-id abcDEFghi`), random-looking or not.
    flag = m.group("k").startswith("-") and not value.startswith("-")
    if not flag and not _looks_like_value(m.group("sep"), value):
        return m.group(0)
    if value == REDACTED or value.startswith("[REDACTED"):
        return m.group(0)
    return f"{head}{REDACTED}{rest}"


def _looks_like_value(sep: str, value: str) -> bool:
    """For whitespace-separated `password foo` only redact when it reads like a credential."""
    if value == REDACTED or value.startswith("[REDACTED"):
        return False
    if sep.strip():  # explicit `=` or `:`
        return True
    # "--password hunter2" style: a flag followed by a value. Plain prose ("token expired") is kept
    # unless the word after it looks random enough to be a secret.
    return any(c.isdigit() for c in value) or (len(value) >= 12 and not value.isalpha())


def _may_match(rule: _Rule, text: str, lowered: str | None) -> bool:
    """False when `text` lacks a literal every match of `rule` contains."""
    if rule.ci:
        if lowered is None:
            return True
        text = lowered
    for group in rule.needs:
        for lit in group:
            if lit in text:
                break
        else:
            return False
    return True


def _trigger(ci: bool) -> re.Pattern[str]:
    """Finds any literal of the first group of every rule (of those that ignore case or not)."""
    lits = sorted({lit for rule in _RULES if rule.ci == ci for lit in rule.needs[0]})
    return re.compile("|".join(re.escape(lit) for lit in lits))


_TRIGGER, _TRIGGER_CI = _trigger(False), _trigger(True)


def scrub_text(text: str) -> str:
    """Return `text` with every credential-looking substring replaced by ``[REDACTED]``."""
    if not text:
        return text
    lowered = text.lower() if text.isascii() else None
    # Most texts contain no rule's literals: one scan for all of them settles those.
    if (lowered is not None and not _TRIGGER_CI.search(lowered)
            and not _TRIGGER.search(text)):
        return text
    for rule in _RULES:
        if not _may_match(rule, text, lowered):
            continue
        scrubbed = rule.pattern.sub(rule.repl, text)  # type: ignore[arg-type]
        if scrubbed != text:  # the next rules look for their literals in the new text
            text = scrubbed
            lowered = text.lower() if text.isascii() else None
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
