"""A peer driven as a subprocess that speaks JSON lines on stdin/stdout (one request, one answer).

Requests (`op` and its fields) and answers:
    {"op": "info"}                                   → {"config": {...}}
    {"op": "add", "ns": ns, "docs": [{"id", "text", "ts"}]}  → {"added": n}
    {"op": "flush"}                                  → {} (make what was added searchable)
    {"op": "search", "ns": ns, "query": q, "k": k}   → {"ids": [...], "ms": server-side ms}
    {"op": "quit"}                                   → (exits)
Any answer may be {"error": "..."} instead. The adapter runs in the peer's own environment (its
venv, its Node), so nothing of the peer is imported into the project's.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from .workload import Doc


class AdapterError(RuntimeError):
    pass


def doc_json(d: Doc) -> dict[str, Any]:
    return {"id": d.id, "text": d.text, "ts": d.ts.isoformat()}


class SubprocessPeer:
    """A peer behind an adapter process; `cmd` starts it, `stderr_path` keeps what it logs."""

    def __init__(self, name: str, cmd: Sequence[str], *, stderr_path: Path,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        self.name = name
        self.cmd = list(cmd)
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.stderr_path = stderr_path
        self.proc: subprocess.Popen[str] | None = None
        self._err: TextIO | None = None
        self.config: dict[str, Any] = {}
        #: Load the quality corpora and most of the latency corpus with `seed`, timing ingest on
        #: `ingest_sample` memories only (a peer whose add() is too slow to load 30k in a run).
        self.bulk = False
        self.ingest_sample = 0

    def start(self) -> None:
        self._err = open(self.stderr_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True, env=self.env, cwd=self.cwd,
                                     bufsize=1)
        self.config = dict(self.request({"op": "info"}).get("config", {}))

    def request(self, req: Mapping[str, Any]) -> dict[str, Any]:
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise AdapterError(f"{self.name}: adapter not started")
        proc.stdin.write(json.dumps(req) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise AdapterError(f"{self.name}: adapter exited ({proc.poll()}); "
                               f"stderr: {self.stderr_tail()}")
        answer = json.loads(line)
        if "error" in answer:
            raise AdapterError(f"{self.name}: {answer['error']}")
        return dict(answer)

    def stderr_tail(self, n: int = 2000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def add(self, ns: str, docs: Sequence[Doc]) -> None:
        self.request({"op": "add", "ns": ns, "docs": [doc_json(d) for d in docs]})

    def seed(self, ns: str, docs: Sequence[Doc]) -> None:
        """The adapter's bulk load (same storage, batched embedding), where it has one."""
        self.request({"op": "seed", "ns": ns, "docs": [doc_json(d) for d in docs]})

    def flush(self) -> None:
        self.request({"op": "flush"})

    def search(self, ns: str, query: str, k: int) -> list[str]:
        return [str(i) for i in self.request({"op": "search", "ns": ns, "query": query,
                                              "k": k})["ids"]]

    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None else []

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                    self.proc.stdin.flush()
                self.proc.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)
        if self._err is not None:
            self._err.close()
            self._err = None
