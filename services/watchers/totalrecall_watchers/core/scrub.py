"""Scrubbing on top of `totalrecall_schema.scrub_text`: argv-aware cmdline redaction and a few
extra token shapes seen in command lines, URLs and log lines.

Everything a watcher puts into an event passes `scrub_extra` before the event is built, and
`MemoryEvent` scrubs again on construction.
"""

from __future__ import annotations

import os
import re

from totalrecall_schema import REDACTED, scrub_text

_SECRET_WORD = re.compile(
    r"(?i)pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth|"
    r"private[_-]?key|credential|bearer|session[_-]?id|cookie|signature")

_EXTRA: list[tuple[re.Pattern[str], str]] = [
    # URL query parameters that carry credentials: ?sig=…&key=…&X-Amz-Signature=…
    (re.compile(r"(?i)([?&;](?:sig|signature|key|code|auth|x-amz-signature|x-amz-credential"
                r"|x-amz-security-token|access_token|id_token|refresh_token|client_secret|pass"
                r"|password|token|apikey|api_key)=)[^&\s#\"']+"), r"\1" + REDACTED),
    # A bare token as URL user: https://ghp_xxx@github.com/… or https://oauth2:xxx@…
    (re.compile(r"(://)[A-Za-z0-9_.~+-]{16,}@"), r"\1" + REDACTED + "@"),
    # curl -u user:password / --user user:password
    (re.compile(r"((?:^|\s)(?:-u|--user)[\s=]+[^\s:]+:)\S+"), r"\1" + REDACTED),
    # Basic auth without the Authorization: prefix.
    (re.compile(r"\bBasic\s+[A-Za-z0-9+/]{8,}={0,2}"), "Basic " + REDACTED),
    # More token shapes.
    (re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}\b"), REDACTED),  # Stripe
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), REDACTED),  # Hugging Face
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), REDACTED),  # GitHub (short test tokens too)
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), REDACTED),  # Slack
    (re.compile(r"hooks\.slack\.com/services/[A-Za-z0-9/]+"),
     "hooks.slack.com/services/" + REDACTED),
    (re.compile(r"\bASIA[0-9A-Z]{16}\b"), REDACTED),  # AWS temporary key id
    (re.compile(r"\bya29\.[A-Za-z0-9_-]{20,}"), REDACTED),  # Google OAuth access token
    (re.compile(r"\bdop_v1_[a-f0-9]{32,}\b"), REDACTED),  # DigitalOcean
    (re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), REDACTED),  # SendGrid
    # A command-line flag naming a secret, then its value: --db-password VALUE (any value).
    (re.compile(r"(?i)((?:^|\s)--?[A-Za-z0-9_.-]*(?:password|passwd|passphrase|secret|token|api-?key"
                r"|access-?key|auth)(?<!-file)(?<!-path)\s+)(?!-)(?!\[REDACTED)\S+"),
     r"\1" + REDACTED),
    (re.compile(r"(\bhtpasswd\s+-\w*b\w*\s+\S+\s+\S+\s+)\S+"), r"\1" + REDACTED),
    # Secrets of command lines as sudo logs them (a text: its argv joined by spaces).
    (re.compile(r"(\bwpa_passphrase\s+\S+\s+)\S+"), r"\1" + REDACTED),  # wpa_passphrase SSID PSK
    (re.compile(r"(\bsmbclient\b[^\n]*?\s(?:-U|--user)[\s=]+[^\s%]+%)\S+"), r"\1" + REDACTED),
    (re.compile(r"(\bldap\w+\b[^\n]*?\s-w\s+)\S+"), r"\1" + REDACTED),  # ldapsearch -w PASSWORD
    (re.compile(r"(\b(?:useradd|usermod)\b[^\n]*?\s-p\s+)\S+"), r"\1" + REDACTED),  # a hash
    (re.compile(r"(\b(?:zip|unzip)\b[^\n]*?\s-P\s+)\S+"), r"\1" + REDACTED),
    (re.compile(r"(\bssh-keygen\b[^\n]*?\s-[NP]\s+)(?!'')\S+"), r"\1" + REDACTED),
    (re.compile(r"(\bnmcli\b[^\n]*?\s(?:password|psk|wifi-sec\.psk|802-11-wireless-security\.psk"
                r"|802-1x\.password)\s+)\S+"), r"\1" + REDACTED),
    # (`redis-cli -a SECRET` and `echo SECRET | sudo -S …` are `scrub_text`'s: any text.)
    # ENV-style assignment of a secret-named variable (FOO_TOKEN=…, MY_AUTH=…).
    (re.compile(r"\b([A-Z][A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|PASS|KEY|AUTH|CREDENTIALS?)"
                r"[A-Z0-9_]*=)(?!\[REDACTED)\S+"), r"\1" + REDACTED),
]

#: Flags whose NEXT argv element is a secret (exact match, per program when ambiguous).
_SECRET_NEXT_ARG_ANY = {"--password", "--passwd", "--pass", "--token", "--secret", "--api-key",
                        "--apikey", "--access-key", "--secret-key", "--auth", "--auth-token",
                        "--client-secret", "--private-key", "--key-password", "--bearer",
                        "--oauth-token", "--passphrase"}
_SECRET_NEXT_ARG_BY_PROG = {
    "redis-cli": {"-a"}, "sshpass": {"-p"}, "mysql": {"-p"}, "mysqldump": {"-p"},
    "mariadb": {"-p"}, "smbclient": {"-U"}, "openssl": {"-passin", "-passout", "-pass", "-k"},
    "useradd": {"-p"}, "usermod": {"-p"}, "ldapsearch": {"-w"}, "ldapmodify": {"-w"},
    "ldapadd": {"-w"}, "ldapdelete": {"-w"}, "ldappasswd": {"-w", "-s"}, "zip": {"-P"},
    "unzip": {"-P"}, "ssh-keygen": {"-N", "-P"},
}


def scrub_extra(text: str) -> str:
    """`scrub_text` plus the extra patterns above (idempotent)."""
    if not text:
        return text
    text = scrub_text(text)
    for pattern, repl in _EXTRA:
        text = pattern.sub(repl, text)
    return text


def _redact_argv(argv: list[str]) -> list[str]:
    """The arguments, each `scrub_extra`ed, with those that follow a secret flag redacted."""
    prog = os.path.basename(argv[0])
    by_prog = _SECRET_NEXT_ARG_BY_PROG.get(prog, set())
    out: list[str] = []
    redact_next = False
    for arg in argv:
        if redact_next:
            out.append(REDACTED)
            redact_next = False
            continue
        low = arg.lower()
        if low in _SECRET_NEXT_ARG_ANY or arg in by_prog:
            redact_next = True
        elif low.startswith("--") and "=" not in arg and _SECRET_WORD.search(low[2:]) \
                and not low.endswith(("-file", "-path", "-dir", "-command", "-cmd")):
            redact_next = True  # --db-password VALUE, --github-token VALUE
        out.append(scrub_extra(arg))
    if prog == "htpasswd" and len(out) > 2 and any(
            a.startswith("-") and "b" in a for a in argv[1:-1]):
        out[-1] = REDACTED  # htpasswd -b FILE USER PASSWORD
    return out


def scrub_cmdline(argv: list[str], max_chars: int = 1000) -> str:
    """Join an argv into one line with secret arguments redacted, then `scrub_extra` it."""
    if not argv:
        return ""
    line = scrub_extra(" ".join(_quote(a) for a in _redact_argv(argv)))
    if len(line) > max_chars:
        line = line[: max_chars - 1] + "…"
    return line


def scrub_command_text(command: str, max_chars: int = 1000) -> str:
    """A command line known only as text (sudo's `COMMAND=`, its argv joined by spaces):
    the argv rules applied to its words, per program for each program a shell line runs
    (`sh -c "mysql -p … | tee"`, `env TOKEN=… cmd`), then `scrub_extra`."""
    if not command.strip():
        return ""
    words = command.split(" ")
    out: list[str] = []
    start = 0
    for i, w in enumerate([*words, "|"]):
        # A new program starts after a shell separator, and after `env`/`sudo`/`sh -c` words.
        if w in ("|", "||", "&&", ";", "-c") or w.endswith(";") or i == len(words):
            seg = words[start:i]
            seg_start = next((k for k, a in enumerate(seg) if a and "=" not in a
                              and os.path.basename(a) not in _WRAPPERS
                              and not (a.startswith("-") and k > 0)), 0)
            out += [*seg[:seg_start], *(_redact_argv(seg[seg_start:]) if seg[seg_start:] else [])]
            if i < len(words):
                out.append(w)
            start = i + 1
    line = scrub_extra(" ".join(out))
    if len(line) > max_chars:
        line = line[: max_chars - 1] + "…"
    return line


_WRAPPERS = {"env", "sudo", "nice", "nohup", "time", "timeout", "ionice", "stdbuf", "doas",
             "sh", "bash", "dash", "zsh", "exec", "xargs"}


def _quote(arg: str) -> str:
    if arg and not re.search(r"[\s\"'\\]", arg):
        return arg
    return "'" + arg.replace("'", "'\\''") + "'"
