"""A generated corpus of secrets, for the secrets row: thousands of samples of every kind of key,
token and password the scrubber (`totalrecall_schema.scrub`) claims to catch, each a fresh value
(random as the issuer makes them, or the way people choose passwords) in the text it is usually
found in (a log line, a shell command, a config file, a JSON document, an HTTP dump, a sentence),
from a seeded RNG: a run can be repeated sample for sample.

`samples(rng, per_kind)` gives `Sample`s; `leaks(sample, text)` says which parts of the secret
survive in a text (any 10-character piece of it, so a value redacted only in part counts).
`ordinary(rng, n)` gives ordinary text, no secret in it, for the false-positive rate.

The shapes are written from what such credentials look like in the wild (issuers' documented
formats), not from the scrubber's patterns.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"
#: How long a piece of a secret must be to count as leaked (shorter ones occur by chance).
PIECE = 10

WORDS = ["summer", "dragon", "monkey", "coffee", "winter", "orange", "silver", "tiger", "rocket",
         "falcon", "pirate", "banana", "marble", "autumn", "thunder", "correct", "horse",
         "battery", "staple", "purple", "castle", "garden", "ninja", "shadow", "hunter"]
USERS = ["admin", "root", "deploy", "app", "svc_backup", "ci", "alice", "bob", "postgres", "grafana"]
HOSTS = ["db.internal", "10.0.3.17", "pg-primary.prod.svc", "cache", "mq.lan", "build-7",
         "registry.example.com", "api.example.org", "192.168.1.20", "vault.corp"]


@dataclass(frozen=True)
class Sample:
    kind: str
    #: The credential itself (what must not survive); a text may hold more than one.
    secrets: tuple[str, ...]
    text: str


def _r(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def password(rng: random.Random) -> str:
    """A password as people and generators make them (never shorter than `PIECE`)."""
    style = rng.randrange(5)
    if style == 0:  # Word + digits + symbol: Summer2024!
        pw = rng.choice(WORDS).capitalize() + str(rng.randint(1000, 99999)) + rng.choice("!#$%*?")
    elif style == 1:  # passphrase: correct-horse-battery-staple
        pw = "-".join(rng.sample(WORDS, 4)) + str(rng.randint(1, 99))
    elif style == 2:  # a generator's: 20 characters of letters, digits, punctuation
        pw = _r(rng, rng.randint(14, 32), ALNUM + "!#$%^*()_+-=.,~")
    elif style == 3:  # l33t: P@ssw0rd-ish
        pw = rng.choice(["P@ss", "S3cr3t", "Adm1n", "Qw3rty", "W3lc0me"]) + _r(rng, 8, ALNUM + "@#")
    else:  # hex or base64 from `openssl rand`
        pw = _r(rng, 32, HEX) if rng.random() < 0.5 else _r(rng, 24, B64)
    return pw if len(pw) >= PIECE else pw + _r(rng, PIECE, ALNUM)


def _url_password(rng: random.Random) -> str:
    """A password as it stands in a URL: reserved characters percent-encoded."""
    return "".join(c if c in ALNUM + "-._~!$*+,;=" else f"%{ord(c):02X}" for c in password(rng))


# --- where secrets are found: wrappers around a snippet ------------------------------------------
def _log(rng: random.Random, snippet: str) -> str:
    prog = rng.choice(["app", "worker", "deploy.sh", "systemd[1]", "cron", "gunicorn", "node"])
    level = rng.choice(["INFO", "DEBUG", "ERROR", "WARN"])
    return (f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
            f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z {rng.choice(HOSTS)} {prog}"
            f"[{rng.randint(100, 99999)}]: {level} {snippet}")


def _shell(rng: random.Random, snippet: str) -> str:
    prompt = rng.choice(["$ ", "# ", f"{rng.choice(USERS)}@build-{rng.randint(1, 9)}:~$ ", ""])
    tail = rng.choice(["", "", " && echo ok", " 2>&1 | tee out.log", "; echo $?"])
    return f"{prompt}{snippet}{tail}"


def _prose(rng: random.Random, snippet: str) -> str:
    return rng.choice([
        "I ran `{s}` and it failed with exit code 1",
        "the deploy broke after this: {s}. Rolled back at 14:02.",
        "note to self, staging uses {s} (rotate next week)",
        "Pasting the line from the runbook:\n{s}\nthen restart the service.",
    ]).format(s=snippet)


def _json(rng: random.Random, snippet: str) -> str:
    return json.dumps({"level": "error", "msg": snippet, "pid": rng.randint(1, 9999)})


def _config(rng: random.Random, snippet: str) -> str:
    return (f"# {rng.choice(['generated', 'managed by ansible', 'do not edit'])}\n"
            f"[{rng.choice(['default', 'database', 'service', 'prod'])}]\n"
            f"log_level = info\n{snippet}\ntimeout = {rng.randint(5, 120)}\n")


Wrap = Callable[[random.Random, str], str]
IN_TEXT: list[Wrap] = [_log, _shell, _prose, _json]  # for a one-line snippet
ANYWHERE: list[Wrap] = [*IN_TEXT, _config]


# --- the kinds -----------------------------------------------------------------------------------
Kind = Callable[[random.Random], tuple[tuple[str, ...], str, list[Wrap]]]


def _aws_key_id(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    v = rng.choice(["AKIA", "ASIA"]) + _r(rng, 16, UPPER_DIGITS)
    return (v,), rng.choice([f"aws configure set aws_access_key_id {v}",
                             f"AWS_ACCESS_KEY_ID={v}", f'"AccessKeyId": "{v}"',
                             f"using credentials {v} for s3://backups"]), IN_TEXT


def _aws_secret(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    v = _r(rng, 40, B64)
    return (v,), rng.choice([f"aws_secret_access_key = {v}", f"export AWS_SECRET_ACCESS_KEY={v}",
                             f'"SecretAccessKey": "{v}"',
                             f"AWS_SECRET_ACCESS_KEY=\"{v}\" aws s3 ls"]), ANYWHERE


def _github(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    v = (rng.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + _r(rng, 36)
         if rng.random() < 0.7 else f"github_pat_{_r(rng, 22)}_{_r(rng, 59)}")
    return (v,), rng.choice([f"git push https://x-access-token:{v}@github.com/acme/api.git",
                             f"export GH_TOKEN={v}", f"echo {v} | gh auth login --with-token",
                             f"git clone https://{v}@github.com/acme/infra",
                             f"found token {v} in CI output"]), IN_TEXT


def _gitlab(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    v = "glpat-" + _r(rng, 20, B64URL)
    return (v,), rng.choice([f"curl --header 'PRIVATE-TOKEN: {v}' https://gitlab.com/api/v4/user",
                             f"git remote set-url origin https://oauth2:{v}@gitlab.com/g/p.git",
                             f"CI token {v} expired"]), IN_TEXT


def _slack(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    if rng.random() < 0.3:
        path = f"T{_r(rng, 10, UPPER_DIGITS)}/B{_r(rng, 10, UPPER_DIGITS)}/{_r(rng, 24)}"
        return (path,), rng.choice([f"posting alert to https://hooks.slack.com/services/{path}",
                                    f"SLACK_WEBHOOK=https://hooks.slack.com/services/{path}"]), \
            IN_TEXT
    v = (f"xox{rng.choice('bpars')}-{_r(rng, 12, string.digits)}-{_r(rng, 13, string.digits)}-"
         f"{_r(rng, 24, ALNUM)}")
    return (v,), rng.choice([f"SLACK_BOT_TOKEN={v} ./notify.sh", f"slack client init with {v}",
                             f'{{"token": "{v}", "channel": "#ops"}}']), IN_TEXT


def _stripe(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    if rng.random() < 0.2:
        v = "whsec_" + _r(rng, 32)
    else:
        v = f"{rng.choice(['sk', 'rk'])}_{rng.choice(['live', 'test'])}_{_r(rng, rng.choice([24, 99]))}"
    return (v,), rng.choice([f"stripe.api_key = '{v}'", f"using key {v} for payouts",
                             f"STRIPE_KEY={v}", f"stripe listen --api-key {v}"]), IN_TEXT


def _openai_anthropic(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    v = rng.choice(["sk-proj-" + _r(rng, 48, B64URL), "sk-ant-api03-" + _r(rng, 93, B64URL),
                    "sk-" + _r(rng, 48)])
    return (v,), rng.choice([f"OPENAI_API_KEY={v}", f"using {v} for the agent",
                             f"client = Anthropic(api_key=\"{v}\")"]), IN_TEXT


def _google(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    v = "AIza" + _r(rng, 35, B64URL)
    return (v,), rng.choice([f"maps key {v}", f"https://maps.googleapis.com/maps/api/js?key={v}",
                             f"GOOGLE_API_KEY={v}"]), IN_TEXT


def _npm(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    v = "npm_" + _r(rng, 36)
    return (v,), rng.choice([f"//registry.npmjs.org/:_authToken={v}", f"NPM_TOKEN={v} npm publish",
                             f"published with {v}"]), ANYWHERE


def _sendgrid(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    v = f"SG.{_r(rng, 22, B64URL)}.{_r(rng, 43, B64URL)}"
    return (v,), rng.choice([f"SENDGRID_API_KEY={v}", f"mail relay configured with {v}"]), IN_TEXT


def _discord(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    path = f"{_r(rng, 18, string.digits)}/{_r(rng, 68, B64URL)}"
    host = rng.choice(["discord.com", "discordapp.com"])
    return (path,), f"notify https://{host}/api/webhooks/{path}", IN_TEXT


def _jwt(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    def enc(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")
    header = enc(json.dumps({"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"},
                            separators=(",", ":")).encode())
    payload = enc(json.dumps({"sub": _r(rng, 12), "exp": rng.randint(1_700_000_000, 1_900_000_000),
                              "role": rng.choice(["admin", "user"])}).encode())
    sig = enc(rng.randbytes(rng.choice([32, 64])))
    jwt = f"{header}.{payload}.{sig}"
    # The header is the same in every token of its algorithm: the payload and signature are it.
    return (payload, sig), rng.choice([f"session cookie is {jwt}", f"token={jwt}",
                                       f"Set-Cookie: session={jwt}; HttpOnly",
                                       f"decoded {jwt} ok"]), IN_TEXT


def _pem(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    label = rng.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY",
                        "ENCRYPTED PRIVATE KEY", "DSA PRIVATE KEY", "PGP PRIVATE KEY BLOCK"])
    lines = [_r(rng, 64, B64) for _ in range(rng.randint(3, 12))]
    body = "\n".join(lines)
    end = f"-----END {label}-----" if rng.random() < 0.85 else ""  # a log cut it off
    block = f"-----BEGIN {label}-----\n{body}\n{end}"
    return tuple(lines), block, [lambda r, s: s, _config, _prose, _json]


def _url_pw(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    pw = _url_password(rng)
    scheme = rng.choice(["postgres", "postgresql", "mysql", "mongodb+srv", "redis", "rediss",
                         "amqp", "https", "ftp", "smtp"])
    user = "" if scheme.startswith("redis") and rng.random() < 0.5 else rng.choice(USERS)
    url = f"{scheme}://{user}:{pw}@{rng.choice(HOSTS)}:{rng.randint(1000, 9999)}/db"
    return (pw,), rng.choice([f"DATABASE_URL={url}", f"connecting to {url} refused",
                              f"psql '{url}'", f'"dsn": "{url}"']), ANYWHERE


def _auth_header(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    if rng.random() < 0.35:
        pw = password(rng)
        v = base64.b64encode(f"{rng.choice(USERS)}:{pw}".encode()).decode()
        header = f"Authorization: Basic {v}"
        secrets: tuple[str, ...] = (v, pw)
    else:
        v = rng.choice([_r(rng, 40, ALNUM + "-._~"), _r(rng, 64, HEX), _r(rng, 32, B64URL)])
        header = f"Authorization: {rng.choice(['Bearer', 'Token', 'bearer'])} {v}"
        secrets = (v,)
    return secrets, rng.choice([f"curl -H '{header}' https://api.example.com/v1/items",
                                f"> GET /v1/items HTTP/1.1\n> Host: api\n> {header}\n",
                                f"request headers: {{'{header.split(': ')[0]}': "
                                f"'{header.split(': ', 1)[1]}'}}"]), IN_TEXT


def _bearer(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    v = _r(rng, rng.randint(20, 64), ALNUM + "-._~")
    return (v,), rng.choice([f"sent Bearer {v} to the API", f"retrying with bearer {v}"]), IN_TEXT


def _assignment(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    pw = password(rng)
    name = rng.choice(["password", "passwd", "db_password", "DB_PASSWORD", "MYSQL_ROOT_PASSWORD",
                       "secret", "client_secret", "api_key", "apiKey", "access_token",
                       "AUTH_TOKEN", "refresh_token", "private_key", "passphrase", "pwd",
                       "credentials", "session_id", "cookie_secret"])
    quote = "" if any(c in pw for c in "\"'") else rng.choice(["", '"', "'"])
    return (pw,), rng.choice([f"{name}={quote}{pw}{quote}", f"{name}: {quote}{pw}{quote}",
                              f"{name} = {quote}{pw}{quote}", json.dumps({name: pw}),
                              f"--{name.lower().replace('_', '-')}={pw}",
                              f"--{name.lower().replace('_', '-')} {pw}",
                              f"export {name.upper()}={quote}{pw}{quote}"]), ANYWHERE


def _high_entropy(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    """A generated secret under a name that says only "key" (signing, encryption, master …)."""
    v = rng.choice([_r(rng, 32, HEX), _r(rng, 64, HEX), _r(rng, 44, B64), _r(rng, 50, ALNUM)])
    name = rng.choice(["SIGNING_KEY", "ENCRYPTION_KEY", "master_key", "hmac_key", "JWT_KEY",
                       "DJANGO_KEY", "encryptionKey", "app.signing-key", "LICENSE_KEY",
                       "webhook_key"])
    quote = rng.choice(["", '"', "'"])
    return (v,), rng.choice([f"{name}={quote}{v}{quote}", f"{name}: {quote}{v}{quote}",
                             f"{name} = {quote}{v}{quote}", json.dumps({name: v}),
                             f"export {name.upper().replace('.', '_').replace('-', '_')}={v}"]), \
        ANYWHERE


def _cli(rng: random.Random) -> tuple[tuple[str, ...], str, list[Wrap]]:
    pw, user, host = password(rng), rng.choice(USERS), rng.choice(HOSTS)
    # No quote in it (it is quoted here) and no leading '-' (a CLI would read a flag).
    safe = pw.replace("'", "").lstrip("-")
    line = rng.choice([
        f"mysql -u {user} -p{safe} -h {host} shop", f"mysqldump -u{user} -p{safe} shop > shop.sql",
        f"sshpass -p '{safe}' ssh {user}@{host}", f"sshpass -p {safe} scp f {user}@{host}:",
        f"docker login -u {user} -p {safe} registry.example.com",
        f"podman login --username {user} -p {safe} quay.io",
        f"curl -u {user}:{safe} https://{host}/api", f"curl --user {user}:{safe} https://{host}/",
        f"echo '{safe}' | sudo -S apt-get install -y nginx",
        f"echo {safe} | sudo -S systemctl restart nginx",
        f"PGPASSWORD={safe} psql -h {host} -U {user}",
        f"redis-cli -h {host} -a {safe} ping",
    ])
    return (safe,), line, [_shell, _log, _prose]


KINDS: dict[str, Kind] = {
    "aws access key id (AKIA, ASIA)": _aws_key_id,
    "aws secret access key": _aws_secret,
    "github token (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_)": _github,
    "gitlab personal access token": _gitlab,
    "slack token or webhook": _slack,
    "stripe key or webhook secret": _stripe,
    "openai / anthropic key": _openai_anthropic,
    "google api key": _google,
    "npm token": _npm,
    "sendgrid key": _sendgrid,
    "discord webhook": _discord,
    "jwt": _jwt,
    "private key block (PEM, OpenSSH, PGP)": _pem,
    "password in a url": _url_pw,
    "authorization header (basic, bearer, token)": _auth_header,
    "bearer token in text": _bearer,
    "secret-named assignment (env, json, yaml, ini, cli flag)": _assignment,
    "generic high-entropy key assignment": _high_entropy,
    "password on a command line (mysql -p, sshpass, docker login, curl -u, sudo -S, "
    "PGPASSWORD, redis-cli -a)": _cli,
}


def samples(rng: random.Random, per_kind: int) -> list[Sample]:
    """`per_kind` samples of every kind, each in a randomly chosen surrounding."""
    out: list[Sample] = []
    for kind, make in KINDS.items():
        for _ in range(per_kind):
            secrets, snippet, wraps = make(rng)
            out.append(Sample(kind, secrets, rng.choice(wraps)(rng, snippet)))
    return out


#: Issuers' fixed prefixes longer than a piece: a piece inside one is public, no leak (the first
#: full run counted "github_pat" in the text that named the kind).
PUBLIC = ("github_pat_", "sk-ant-api03-")


def pieces(secret: str) -> list[str]:
    """The `PIECE`-character pieces of a secret whose survival is a leak (all of them but those
    inside an issuer's fixed prefix)."""
    if len(secret) <= PIECE:
        return [secret]
    return [piece for piece in (secret[i:i + PIECE] for i in range(len(secret) - PIECE + 1))
            if not any(piece in prefix for prefix in PUBLIC)]


def leaks(sample: Sample, text: str) -> list[str]:
    """The secrets of `sample` of which some piece is still in `text`."""
    return [s for s in sample.secrets if any(p in text for p in pieces(s))]


# --- ordinary text, for the false-positive rate --------------------------------------------------
REPO = Path(__file__).resolve().parents[2]


def _hdfs_lines() -> list[str]:
    """Real log lines: the Content column of LogHub's HDFS sample (tests/data/logs)."""
    import csv

    with open(REPO / "tests" / "data" / "logs" / "HDFS_2k.log_structured.csv", newline="") as fh:
        return [row["Content"] for row in csv.DictReader(fh)]


def _ordinary_commands(rng: random.Random) -> str:
    """Shell commands, log lines and sentences without a credential but with the look-alikes
    a scrubber may mistake for one (hashes, digests, uuids, -p for a port or a pid, "password"
    in prose)."""
    sha = _r(rng, 40, HEX)
    return rng.choice([
        f"git checkout {sha[:12]} && git log --oneline -5",
        f"git commit -m 'fix the login page' --author 'Ada <ada@example.com>' # {sha}",
        f"docker pull nginx@sha256:{_r(rng, 64, HEX)}",
        f"ssh -p {rng.randint(1024, 65535)} {rng.choice(USERS)}@{rng.choice(HOSTS)}",
        f"ps -p {rng.randint(2, 99999)} -o pid,cmd", f"mkdir -p /srv/app/{_r(rng, 6).lower()}",
        f"kubectl logs pod/api-{_r(rng, 10, HEX)}-{_r(rng, 5).lower()} -n prod",
        f"request {_r(rng, 8, HEX)}-{_r(rng, 4, HEX)}-{_r(rng, 4, HEX)}-{_r(rng, 4, HEX)}-"
        f"{_r(rng, 12, HEX)} took {rng.randint(1, 900)} ms",
        "the password expired yesterday, asked IT to reset it",
        "remember to rotate the API token before Friday",
        f"user {rng.choice(USERS)} failed to log in: bad password (attempt {rng.randint(1, 5)})",
        f"token bucket refilled: {rng.randint(1, 500)} tokens per second",
        f"nginx.service: Main process exited, code=exited, status={rng.randint(1, 255)}/FAILURE",
        f"pip install requests=={rng.randint(1, 3)}.{rng.randint(0, 31)}.{rng.randint(0, 9)}",
        f"open https://github.com/acme/api/pull/{rng.randint(1, 9999)}",
        f"primary_key = id, sort_key = created_at, partition key {rng.choice(USERS)}",
        f"session started for {rng.choice(USERS)} from {rng.choice(HOSTS)} port "
        f"{rng.randint(1024, 65535)} ssh2",
        f"cache key {_r(rng, 16, HEX)} evicted after {rng.randint(1, 3600)} s",
        f"rsync -avz -p ./dist/ deploy@{rng.choice(HOSTS)}:/srv/www/",
    ])


def ordinary(rng: random.Random, n: int) -> dict[str, list[str]]:
    """Ordinary text by source: real HDFS log lines, and `n` generated commands and sentences."""
    return {"HDFS log lines (LogHub)": _hdfs_lines(),
            "commands and sentences with look-alikes": [_ordinary_commands(rng) for _ in range(n)]}
