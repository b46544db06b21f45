"""A question that asks for a kind of value ranks the memories holding one first."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from totalrecall_recall_api.core.answer_type import answer_type_first, asked_type
from totalrecall_recall_api.core.fusion import Candidate

T0 = datetime(2024, 12, 10, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize(("query", "kind"), [
    ("What port did matlab fail to use?", "port"),
    ("What is the port number of the invalid user test?", "port"),
    ("Which ports did the scanner try?", "port"),
    ("What is the IP address of the user 123?", "address"),
    ("which IP did user admin come from", "address"),
    ("What is the name of the function that returns an invalid user ted?", "function"),
    ("Which method updated the blockMap?", "function"),
    ("What's the pid of the process using the CPU?", "pid"),
    ("which process is hogging the CPU at the moment?", "pid"),
    ("which config file was edited before nginx failed?", "path"),
    ("What is the source port of the connection?", "port"),
    ("What happened to process 4182?", None),
    ("Which file filled /var?", "path"),
    ("what is the path of the deleted block?", "path"),
    # asks for something else: a reason, a status, a user, a count
    ("Why did the port scan fail?", None),
    ("What is the status of the user postgres?", None),
    ("What did the webmaster fail to provide?", None),
    ("How many ports were tried?", None),
    ("What is the address of my new apartment?", None),
    ("What is the remote address of the failed login?", "address"),
    ("What user logged in from 10.0.0.7?", None),
])
def test_the_kind_asked_for_is_read_from_the_opening(query: str, kind: str | None) -> None:
    found = asked_type(query)
    assert (found.name if found else None) == kind


@pytest.mark.parametrize(("kind", "holds", "lacks"), [
    ("What port?", "Failed password for root from 183.62.140.253 port 53630 ssh2",
     "Invalid user test from 183.62.140.253"),
    ("What port?", "blockMap updated: 10.250.11.85:50010 is added to blk_1", "size 67108864"),
    ("What IP address?", "Invalid user test from 52.80.34.196", "Invalid user test [preauth]"),
    ("What function?", "input_userauth_request: invalid user ted [preauth]",
     "Invalid user ted from 187.141.143.180"),
    ("What function?", "BLOCK* NameSystem.addStoredBlock: blockMap updated",
     "Verification succeeded for blk_-4117999745005013424"),
    ("What function?", "pam_unix(sshd:auth): authentication failure", "session closed, see man 8"),
    ("What pid?", "sshd[24200]: Connection closed", "sshd: Connection closed"),
    ("Which process?", "python (PID 14671) using 100% CPU",
     "nginx.service: Main process exited, code=exited, status=1/FAILURE"),
    ("What path?", "Deleting block blk_1 file /mnt/hadoop/dfs/data/current/blk_1",
     "see https://example.com/docs for details"),
])
def test_what_a_value_of_each_kind_looks_like(kind: str, holds: str, lacks: str) -> None:
    t = asked_type(kind)
    assert t is not None
    assert t.value.search(holds) and not t.value.search(lacks)


def test_the_memories_holding_the_kind_come_first_in_their_order() -> None:
    invalid = Candidate("invalid", T0, "Invalid user matlab from 52.80.34.196", score=0.9)
    older = Candidate("older", T0,
                      "Failed password for invalid user matlab from 52.80.34.196 port 36060",
                      score=0.5)
    newer = Candidate("newer", T0,
                      "Failed password for invalid user matlab from 52.80.34.196 port 46199",
                      score=0.6)
    out = answer_type_first([invalid, older, newer], "What port did matlab fail to use?")
    assert [c.key for c in out] == ["newer", "older", "invalid"]
    assert newer.components["answer_type"] == pytest.approx(0.9)
    assert "answer_type" not in invalid.components


@pytest.mark.parametrize("query", ["What did matlab fail to do?", "What port did matlab use?"])
def test_nothing_changes_when_no_kind_is_asked_or_none_or_all_hold_one(query: str) -> None:
    a = Candidate("a", T0, "Invalid user matlab from 52.80.34.196", score=0.9)
    b = Candidate("b", T0, "input_userauth_request: invalid user matlab", score=0.5)
    assert [c.key for c in answer_type_first([a, b], query)] == ["a", "b"]
    assert all("answer_type" not in c.components for c in (a, b))
    ports = [Candidate(k, T0, f"port {k}", score=s) for k, s in (("1", 0.2), ("2", 0.4))]
    assert [c.key for c in answer_type_first(ports, "What port?")] == ["1", "2"]  # as given


def test_a_value_is_looked_for_in_the_summary_not_the_provenance_in_the_detail() -> None:
    """Every line read from a log file has that file's path in its detail: "which config file
    was edited?" asks for the edited one."""
    edit = Candidate("edit", T0, "Modified /etc/nginx/nginx.conf", score=0.5)
    fail = Candidate("fail", T0, "nginx.service: Failed with result 'exit-code'. "
                     "read from /var/log/syslog", score=0.9)
    summaries = {"edit": "Modified /etc/nginx/nginx.conf",
                 "fail": "nginx.service: Failed with result 'exit-code'."}
    out = answer_type_first([fail, edit], "which config file was edited before nginx failed?",
                            lambda c: summaries[c.key])
    assert [c.key for c in out] == ["edit", "fail"]
    unchanged = answer_type_first([fail, edit], "which config file was edited before it failed?")
    assert [c.key for c in unchanged] == ["fail", "edit"]  # both texts hold a path

