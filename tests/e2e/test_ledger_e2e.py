"""The agent's action ledger on the real stack: appended entries verify and become memories that
recall finds (real NATS, embedder with the real model, indexer, Postgres, Zvec)."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from stacklib import Api


def test_ledger_entries_verify_and_are_recallable(stack: Api) -> None:
    actions = [
        {"action": "file.write", "target": "/etc/nginx/sites-enabled/ledgertest.conf",
         "detail": "Added a server block for ledgertest.example on port 8089."},
        {"action": "service.restart", "target": "nginx.service",
         "detail": "Restarted nginx to load the ledgertest.example server block."},
        {"action": "package.install", "target": "apt-get install -y ledgertest-tools",
         "detail": "Installed ledgertest-tools 1.2 for the certificate renewal."},
    ] * 4  # concurrent writers
    with ThreadPoolExecutor(6) as pool:
        rs = list(pool.map(lambda a: stack.post("/memory/ledger", a), actions))
    assert all(r.status_code == 200 for r in rs), [r.text for r in rs]
    seqs = sorted(r.json()["entry"]["seq"] for r in rs)
    assert seqs == list(range(seqs[0], seqs[0] + len(actions)))

    hit = stack.wait_recallable("which service did the agent restart for ledgertest.example?",
                                "nginx.service", timeout=120)
    assert hit["category"] == "agent.action"
    stack.wait_recallable("when did the agent install ledgertest-tools?", "ledgertest-tools",
                          timeout=120)

    if stack.home is not None:  # our own stack: its ledger file is at hand
        out = subprocess.run([sys.executable, "-m", "totalrecall.main", "ledger", "verify",
                              "--path", str(stack.home / "ledger.jsonl"), "--json"],
                             capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
        assert json.loads(out.stdout)["entries"] >= len(actions)
