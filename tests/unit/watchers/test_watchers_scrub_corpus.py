"""A corpus of realistic secrets in command lines, log lines, paths and URLs: none may survive
into the JSON a watcher publishes."""

from __future__ import annotations

import json

import pytest
from totalrecall_watchers.adapters.filesystem import FileChangeTracker
from totalrecall_watchers.adapters.publisher import RecordingPublisher
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.filesystem import PathFilter
from totalrecall_watchers.core.journal import JournalParser
from totalrecall_watchers.core.process import ProcessThresholds, ProcessWatcher, ProcSample
from totalrecall_watchers.core.ratelimit import RateLimiter
from totalrecall_watchers.core.scrub import scrub_cmdline, scrub_extra
from totalrecall_watchers.handlers import EventHandler
from totalrecall_watchers.metrics import Metrics

JWT = ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
       "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")

#: (argv, secrets that must not appear)
CMDLINES: list[tuple[list[str], list[str]]] = [
    (["mysql", "-u", "root", "-pS3cr3tPassw0rd!", "prod"], ["S3cr3tPassw0rd"]),
    (["psql", "postgresql://admin:hunter2pass@db.internal:5432/app"], ["hunter2pass"]),
    (["curl", "-H", f"Authorization: Bearer {JWT}", "https://api.example.com"], [JWT[:30]]),
    (["curl", "-u", "deploy:Tr0ub4dor&3", "https://example.com"], ["Tr0ub4dor"]),
    (["redis-cli", "-h", "cache", "-a", "redisPassw0rd", "ping"], ["redisPassw0rd"]),
    (["sshpass", "-p", "Sup3rS3cret", "ssh", "host"], ["Sup3rS3cret"]),
    (["aws", "configure", "set", "aws_secret_access_key",
      "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"], ["wJalrXUtnFEMI"]),
    (["python3", "bot.py", "--token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"],
     ["xoxb-123456789012", "AbCdEfGhIjKlMnOp"]),
    (["node", "server.js", "--api-key=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"],
     ["abcdefghijklmnopqrstuvwxyz0123456789"]),
    (["git", "clone", "https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/org/r.git"],
     ["ghp_abcdefghij"]),
    (["env", "GITHUB_TOKEN=ghp_1234567890abcdefghijklmnopqrstuvwxyz", "make"], ["ghp_1234567890"]),
    (["docker", "run", "-e", "POSTGRES_PASSWORD=pgS3cret!", "postgres:16"], ["pgS3cret"]),
    (["docker", "run", "-e", "MY_SERVICE_AUTH=plainwords", "img"], ["plainwords"]),
    (["openssl", "enc", "-aes256", "-pass", "pass:MyEncPass123"], ["MyEncPass123"]),
    (["java", "-Djavax.net.ssl.keyStorePassword=changeit123", "-jar", "app.jar"], ["changeit123"]),
    (["htpasswd", "-b", "/etc/nginx/.htpasswd", "admin", "HtP4ssw0rd"], ["HtP4ssw0rd"]),
    (["app", "--db-password", "CorrectHorseBattery"], ["CorrectHorseBattery"]),
    (["wget", "https://bucket.s3.amazonaws.com/f?X-Amz-Signature=abcdef0123456789abcdef&"
      "X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F2024"], ["abcdef0123456789abcdef", "AKIAIOSFODNN7"]),
    (["stripe", "listen", "--api-key", "sk_live_51Habcdefghijklmnopqrstuv"], ["51Habcdefghij"]),
    (["huggingface-cli", "login", "--token", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"],
     ["hf_abcdefghij"]),
    (["python", "-c", "requests.get(u, headers={'X-Api-Key': 'f00dbabe1234567890'})"],
     ["f00dbabe1234567890"]),
    (["gh", "auth", "login", "--with-token", "gho_16C7e42F292c6912E7710c838347Ae178B4a"],
     ["16C7e42F292c6912E7710c8"]),
    (["ffmpeg", "-i", "rtsp://cam:camPassw0rd@10.0.0.9/stream"], ["camPassw0rd"]),
    (["ssh", "-i", "/home/a/.ssh/id_ed25519", "-o", "ProxyCommand=x", "host"], []),
]

#: journal MESSAGE lines and their secrets
LOG_LINES: list[tuple[str, list[str]]] = [
    ("connecting to amqp://guest:rabbitPass99@rabbit:5672/ failed", ["rabbitPass99"]),
    ("upstream rejected Authorization: Basic YWRtaW46cGFzc3dvcmQxMjM=", ["YWRtaW46cGFzc3dvcmQx"]),
    ("sending Basic YWRtaW46c2VjcmV0MTIzNDU2 to proxy", ["YWRtaW46c2VjcmV0MTIz"]),
    ("request failed: token=abc123def456ghi789 expired", ["abc123def456ghi789"]),
    ("Using AWS key AKIAIOSFODNN7EXAMPLE for s3", ["AKIAIOSFODNN7EXAMPLE"]),
    ("key material: -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7xQ9\n"
     "-----END RSA PRIVATE KEY-----", ["MIIEpAIBAAKCAQEA7xQ9"]),
    ("env: OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123", ["abcdefghijklmnopqrstuvwxyz0123"]),
    ('config dump {"user": "svc", "password": "jsonS3cret!"}', ["jsonS3cret"]),
    ("posting to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
     ["XXXXXXXXXXXXXXXXXXXXXXXX"]),
    ("gitlab push with glpat-abcdefghij1234567890 denied", ["glpat-abcdefghij1234567890"]),
    ("lost session_id=8f14e45fceea167a5a36dedd4bea2543", ["8f14e45fceea167a5a36dedd4bea2543"]),
    ("Cookie: sessionid=abcd1234efgh5678; theme=dark", ["abcd1234efgh5678"]),
    ("got 401 with Bearer abcdefghijklmnopqrstuvwxyz123456", ["abcdefghijklmnopqrstuvwxyz123456"]),
    ("google oauth ya29.a0AfH6SMBabcdefghijklmnopqrstuvwxyz rejected", ["a0AfH6SMBabcdefghij"]),
    ("mongo: mongodb+srv://user:m0ng0Pass@cluster0.mongodb.net/db", ["m0ng0Pass"]),
    ("webhook https://api.example.com/hook?access_token=9a8b7c6d5e4f3a2b1c&x=1",
     ["9a8b7c6d5e4f3a2b1c"]),
    ("maps call https://maps.googleapis.com/api?key=AIzaSyA1234567890abcdefghijklmnopqrstu",
     ["AIzaSyA1234567890"]),
    ("client_secret: 'Zx9Yw8Vu7Ts6' rejected", ["Zx9Yw8Vu7Ts6"]),
    ("npm ERR! npm_abcdefghijklmnopqrstuvwxyz0123456789 revoked", ["npm_abcdefghijklmnop"]),
    ("sendgrid SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123 invalid",
     ["SG.abcdefghijklmnop"]),
]

#: file paths and their secrets
PATHS: list[tuple[str, list[str]]] = [
    ("/home/alice/downloads/report.pdf?sig=SIGabcdef1234567890&se=2025", ["SIGabcdef1234567890"]),
    ("/home/alice/creds/api_key=AKIAIOSFODNN7EXAMPLE.txt", ["AKIAIOSFODNN7EXAMPLE"]),
    ("/srv/mnt/https:/admin:p4ssw0rdInPath@host/x", []),  # not a URL; nothing promised
    ("/tmp/token=ghp_abcdefghijklmnopqrstuvwxyz0123456789/out", ["ghp_abcdefghij"]),
    ("/etc/app/PASSWORD=Hunter2Hunter2.conf", ["Hunter2Hunter2"]),
]


def _ctx() -> EventContext:
    return EventContext(hostname="box", clock=FakeClock())


@pytest.mark.parametrize(("argv", "secrets"), CMDLINES, ids=lambda x: str(x)[:40])
def test_cmdline_secrets_never_reach_a_process_event(argv: list[str], secrets: list[str]) -> None:
    ctx = _ctx()

    class Source:
        cpu = 0.0

        def sample(self) -> list[ProcSample]:
            return [ProcSample(pid=4242, create_time=1.7e9, name=argv[0], cmdline=argv,
                               username="alice", cpu_time=self.cpu, rss=1, mem_percent=0.1)]

    src = Source()
    w = ProcessWatcher(ctx, thresholds=ProcessThresholds(cpu_percent=50), source=src)
    w.poll()
    src.cpu = 30.0
    ctx.clock.advance(30)  # type: ignore[attr-defined]
    (event,) = w.poll()
    published = event.model_dump_json()
    for s in secrets:
        assert s not in published, f"{s!r} leaked: {event.detail}"
        assert s not in scrub_cmdline(argv)
    assert argv[0] in event.detail  # the command itself is still there


@pytest.mark.parametrize(("line", "secrets"), LOG_LINES, ids=lambda x: str(x)[:40])
def test_log_secrets_never_reach_a_journal_event(line: str, secrets: list[str]) -> None:
    parser = JournalParser(_ctx())
    entry = {"MESSAGE": line, "PRIORITY": "3", "_SYSTEMD_UNIT": "app.service",
             "SYSLOG_IDENTIFIER": "app", "_PID": "77"}
    event = parser.parse(json.dumps(entry))
    assert event is not None
    published = event.model_dump_json()
    for s in secrets:
        assert s not in published, f"{s!r} leaked: {published}"


@pytest.mark.parametrize(("path", "secrets"), PATHS, ids=lambda x: str(x)[:40])
def test_path_secrets_never_reach_a_file_event(path: str, secrets: list[str]) -> None:
    tracker = FileChangeTracker(_ctx(), PathFilter([], []), coalesce_s=0)
    (event,) = tracker.batch({(3, path)})
    published = event.model_dump_json()
    for s in secrets:
        assert s not in published, f"{s!r} leaked: {published}"
        assert s not in scrub_extra(path)


async def test_everything_through_the_handler_is_scrubbed() -> None:
    """The JSON handed to the publisher (what goes on the wire) holds none of the corpus."""
    ctx = _ctx()
    pub = RecordingPublisher()
    handler = EventHandler(pub, RateLimiter(per_watcher_per_hour=1e6, per_watcher_burst=1e6,
                                            global_per_hour=1e6, global_burst=1e6,
                                            monotonic=ctx.clock.monotonic), Metrics())
    all_secrets: list[str] = []
    for line, secrets in LOG_LINES:
        await handler("test", ctx.event("test", "error", "system", line, detail=line,
                                        command=line, nested_path=line))
        all_secrets += secrets
    for argv, secrets in CMDLINES:
        cmd = " ".join(argv)
        await handler("test", ctx.event("test", "system.process", "spawn", cmd, detail=cmd))
        all_secrets += secrets
    wire = "\n".join(e.model_dump_json() for e in pub.events)
    assert len(pub.events) == len(LOG_LINES) + len(CMDLINES)
    leaked = [s for s in all_secrets if s in wire]
    assert not leaked
