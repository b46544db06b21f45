"""core/conclusions.py: what a conversation turn concluded, by rule (no LLM)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from totalrecall_recall_api.core.conclusion_rules import RULES
from totalrecall_recall_api.core.conclusions import (
    MAX_PER_TURN,
    asked_categories,
    derive,
    derived_first,
    extract,
    is_turn,
    masked,
    profile,
    role_of,
    turn_text,
)
from totalrecall_recall_api.core.fusion import Candidate
from totalrecall_schema import Memory, MemoryEvent
from totalrecall_schema.taxonomy import CATEGORIES

NOW = datetime.now(UTC)


def rules_of(text: str, role: str | None) -> list[str]:
    return [c.rule.name for c in extract(text, role)]


# --- what is concluded ------------------------------------------------------------------------
@pytest.mark.parametrize(("role", "text", "rule"), [
    # the user's approvals
    ("user", "Yes, go ahead.", "approval.go_ahead"),
    ("user", "ok go ahead and restart it", "approval.go_ahead"),
    ("user", "Approved.", "approval.go_ahead"),
    ("user", "Sure, do it", "approval.go_ahead"),
    ("user", "yes please", "approval.go_ahead"),
    ("user", "Actually, go ahead", "approval.go_ahead"),
    ("user", "LGTM, ship it!", "approval.go_ahead"),
    ("user", "You can proceed with the upgrade", "approval.go_ahead"),
    ("user", "I approve the kernel upgrade.", "approval.go_ahead"),
    # the user's refusals
    ("user", "No, never restart the database without asking.", "refusal.no"),
    ("user", "No, don't.", "refusal.no"),
    ("user", "Nope, not now.", "refusal.no"),
    ("user", "Don't do that.", "refusal.dont_do_that"),
    ("user", "Please don't do that", "refusal.dont_do_that"),
    ("user", "Do not touch /etc/nixos.", "refusal.do_not_touch"),
    ("user", "Never touch my dotfiles", "refusal.do_not_touch"),
    ("user", "Stop!", "refusal.stop"),
    ("user", "stop it", "refusal.stop"),
    ("user", "Please stop doing that.", "refusal.stop"),
    ("user", "Don't restart the database.", "refusal.dont"),
    ("user", "Denied.", "refusal.not_approved"),
    ("user", "I don't want you to delete anything in /srv.", "refusal.not_approved"),
    # the user's corrections
    ("user", "Actually, it's port 6543.", "correction.actually"),
    ("user", "No, actually the staging DB is on db-02.", "correction.actually"),
    ("user", "The port is actually 6543, not 5432.", "correction.actually"),
    ("user", "No, I meant the staging server.", "correction.meant"),
    ("user", "Sorry, I meant nginx, not apache.", "correction.meant"),
    ("user", "Correction: the backup runs at 03:00.", "correction.explicit"),
    ("user", "No, it's on the NAS.", "correction.no_its"),
    # the user's stated preferences
    ("user", "I prefer podman over docker for containers.", "preference.prefer"),
    ("user", "I'd rather use fish as my shell.", "preference.prefer"),
    ("user", "I would prefer tabs for indentation", "preference.prefer"),
    ("user", "My favourite editor is helix.", "preference.prefer"),
    ("user", "Always use podman instead of docker.", "preference.always"),
    ("user", "Please always ask before rebooting.", "preference.always"),
    ("user", "You should always run the tests first.", "preference.always"),
    ("user", "Never run apt upgrade on a Friday.", "preference.never"),
    ("user", "Don't ever use sudo in scripts.", "preference.never"),
    ("user", "Don't use tabs.", "preference.never"),
    ("user", "Please don't use sudo for that.", "preference.please_dont"),
    ("user", "Please avoid force pushes to main.", "preference.please_dont"),
    ("user", "From now on, ask before restarting services.", "preference.from_now_on"),
    ("user", "Keep the logs for 30 days going forward.", "preference.from_now_on"),
    ("user", "Use rsync rather than scp for the backups", "preference.use_instead"),
    # fixes applied (anyone)
    ("assistant", "I fixed it by lowering the MTU to 1380.", "fix.fixed_by"),
    ("assistant", "Fixed by adding the user to the docker group.", "fix.fixed_by"),
    ("user", "I solved the problem by reinstalling grub.", "fix.fixed_by"),
    ("assistant", "I cleared the cache and that fixed it.", "fix.fixed_by"),
    ("assistant", "The fix was to clear the apt cache.", "fix.the_fix"),
    ("assistant", "The workaround is to pin the kernel to 6.6.", "fix.the_fix"),
    ("assistant", "Fix: journalctl --vacuum-size=500M", "fix.the_fix"),
    ("assistant", "I restarted nginx and it came back.", "fix.restarted"),
    ("assistant", "Restarted docker.service.", "fix.restarted"),
    ("user", "We rebooted the router this morning.", "fix.restarted"),
    ("assistant", "nginx was restarted at 14:02.", "fix.restarted"),
    ("assistant", "I rolled back the kernel to 6.6.30.", "fix.rolled_back"),
    ("assistant", "Reverted the commit that broke the build.", "fix.rolled_back"),
    ("assistant", "The upgrade was rolled back.", "fix.rolled_back"),
    ("assistant", "I applied the patch from upstream.", "fix.applied"),
    ("assistant", "I lowered the MTU to 1380.", "fix.applied"),
    ("assistant", "We set vm.swappiness to 10.", "fix.applied"),
    ("assistant", "I ran `systemctl restart nginx` and it works now.", "fix.ran"),
    ("user", "I executed `nix-collect-garbage -d`.", "fix.ran"),
    # diagnoses (anyone)
    ("assistant", "The cause was a stale pid file in /run/nginx.pid.", "diagnosis.cause"),
    ("assistant", "The real cause of the slow boots was a swap file on NFS.", "diagnosis.cause"),
    ("assistant", "The outage was caused by an expired certificate.", "diagnosis.cause"),
    ("assistant", "Root cause: the disk was full.", "diagnosis.root_cause"),
    ("user", "The root cause was a bad DIMM.", "diagnosis.root_cause"),
    ("assistant", "nginx failed because port 80 was already taken by apache.", "diagnosis.because"),
    ("assistant", "The build crashed due to a missing libssl.", "diagnosis.because"),
    ("assistant", "Postgres wouldn't start because the data directory was owned by root.",
     "diagnosis.because"),
    ("assistant", "It turned out the cron job was disabled.", "diagnosis.turned_out"),
    ("assistant", "Turns out that DNS was pointing at the old server.", "diagnosis.turned_out"),
    ("assistant", "The problem is that the certificate expired yesterday.",
     "diagnosis.problem_is"),
    ("assistant", "The culprit was a runaway tracker-miner process.", "diagnosis.problem_is"),
])
def test_a_conclusion_is_found_with_its_rule(role: str, text: str, rule: str) -> None:
    found = extract(text, role)
    assert [c.rule.name for c in found] == [rule], text
    c = found[0]
    assert c.sentence == " ".join(text.split()) and (c.start, c.end) == (0, len(text))
    assert c.rule.subcategory in CATEGORIES[c.rule.category]  # the taxonomy's, not made up


@pytest.mark.parametrize(("role", "text"), [
    # questions and proposals are no fixes, nor decisions
    ("assistant", "Should I restart nginx?"),
    ("assistant", "should I restart nginx"),
    ("user", "Did you restart nginx?"),
    ("assistant", "Shall we roll back the kernel?"),
    ("assistant", "Was the cause a full disk?"),
    ("user", "Do you prefer vim?"),
    ("user", "Can I go ahead?"),
    ("assistant", "I'll restart nginx now."),
    ("assistant", "I can apply the patch if you want."),
    ("assistant", "We need to roll back the kernel."),
    # negations and attempts
    ("assistant", "I didn't restart nginx."),
    ("assistant", "I haven't rolled back anything."),
    ("assistant", "Nobody restarted the database."),
    ("user", "I tried restarting nginx but it didn't help."),
    ("assistant", "The cause was not DNS."),
    ("assistant", "The problem is not the disk."),
    ("assistant", "It didn't fail because of the network."),
    ("assistant", "I never ran `rm -rf /srv`."),
    ("assistant", "I should have rolled back the kernel."),
    # hedges and conditions
    ("assistant", "Maybe the cause is DNS."),
    ("assistant", "The root cause might be the kernel update."),
    ("assistant", "It probably failed because of the disk."),
    ("assistant", "If the cause is DNS, we should flush the cache."),
    ("assistant", "I ran `df -h` to see if the disk was full."),
    # quoted text, block quotes, code, shell lines
    ("assistant", 'The log said "the cause was a full disk" but that was old.'),
    ("user", 'He told me "never use tabs" once.'),
    ("assistant", "```\nthe cause was X\nI restarted nginx\n```"),
    ("assistant", "~~~\nroot cause: DNS\n~~~"),
    ("assistant", "> the root cause: DNS"),
    ("user", "> yes, go ahead"),
    ("assistant", "$ systemctl restart nginx because it failed"),
    # not conclusions at all
    ("user", "stop the nginx service"),
    ("user", "Don't worry about it."),
    ("user", "Don't forget the backup."),
    ("user", "Never mind."),
    ("user", "Never mind, it works."),
    ("user", "Always the same error."),
    ("user", "I used to prefer vim."),
    ("user", "the server restarted unexpectedly"),
    ("assistant", "nginx restarted at 3am"),
    ("assistant", "It turned out fine."),
    ("assistant", "It turned out to be nothing."),
    ("assistant", "The problem is fixed now."),
    ("assistant", "The issue is still there."),
    ("assistant", "I set up a cron job to run backups."),
    ("user", "Permission denied when I run it"),
    ("user", "No, it's fine."),
    ("user", "Yes."),
    ("user", ""),
    # the user's decisions and preferences are the user's alone
    ("assistant", "I prefer to check the logs first."),
    ("assistant", "Never mind, it works."),
    ("assistant", "Don't do that."),
    ("assistant", "Yes, go ahead."),
    ("assistant", "From now on I will check the logs first."),
    (None, "I prefer vim"),
    (None, "Yes, go ahead."),
])
def test_no_conclusion(role: str | None, text: str) -> None:
    assert rules_of(text, role) == [], text


def test_a_turn_of_unknown_speaker_gives_fixes_and_diagnoses_only() -> None:
    assert rules_of("The backup failed because the NAS was offline.", None) == [
        "diagnosis.because"]
    assert rules_of("I prefer vim. Yes, go ahead.", None) == []


def test_several_sentences_one_conclusion_each_in_order() -> None:
    text = ("Thanks for checking. The rsync job failed because the NAS share was read-only. "
            "I remounted it read-write and restarted the backup.service unit. Should I also "
            "add a check for this?\n- The fix was to remount /mnt/nas rw.")
    found = extract(text, "assistant")
    assert [c.rule.name for c in found] == ["diagnosis.because", "fix.restarted", "fix.the_fix"]
    assert found[0].sentence == "The rsync job failed because the NAS share was read-only."
    assert found[2].sentence == "The fix was to remount /mnt/nas rw."  # the list marker left out
    for c in found:  # spans are of the text as given
        assert " ".join(text[c.start:c.end].split()) == c.sentence


def test_the_first_rule_wins_a_sentence() -> None:
    # a refusal before an approval it contains, a correction before the preference it states
    assert rules_of("No, don't go ahead.", "user") == ["refusal.no"]
    assert rules_of("Actually, I prefer podman.", "user") == ["correction.actually"]
    assert rules_of("I fixed it by restarting nginx because it had crashed.",
                    "assistant") == ["fix.fixed_by"]


def test_masking_keeps_every_character_in_place() -> None:
    text = 'Run `rm -rf x` "quoted. text" ok\n```\ncode. here\n```\n> quoted line\ndone.'
    hidden = masked(text)
    assert len(hidden) == len(text)
    assert "`xxxxxxxx`" in hidden and "quoted" not in hidden and "code" not in hidden
    assert hidden.endswith("done.")


def test_a_sentence_with_a_secret_is_scrubbed_in_the_memory() -> None:
    turn = MemoryEvent(id="t1", summary="assistant: The cause was a wrong password in "
                       "postgres://app:hunter2secret@db:5432/app, I fixed it by rotating it.",
                       actor="agent", category="conversation")
    [d] = derive(turn)
    assert "hunter2secret" not in d.summary and "[REDACTED]" in d.summary


def test_a_huge_turn_is_read_only_so_far_and_fast() -> None:
    line = "the nightly job failed because the disk was full and nobody noticed it. "
    text = line * 5000 + "\n" + "x" * 50_000  # 400 kB, a paste of logs
    t0 = time.perf_counter()
    found = extract(text, "assistant")
    assert time.perf_counter() - t0 < 2.0
    assert len(found) == MAX_PER_TURN
    assert extract("a" * 200_000, "user") == []  # one endless "sentence": skipped
    assert extract("because " * 20_000, "assistant") == []


# --- turns in, memories out -------------------------------------------------------------------
def _turn(summary: str, **kw: object) -> MemoryEvent:
    fields: dict[str, object] = {"id": "turn-1", "namespace": "agent-1", "category": "conversation",
                                 "subcategory": "flush", "actor": "user", "source": "flush",
                                 "timestamp": NOW - timedelta(minutes=5), "summary": summary,
                                 "metadata": {"session": "s-42", "host": "laptop",
                                              "machine_id": "m1"}}
    fields.update(kw)
    return MemoryEvent(**fields)  # type: ignore[arg-type]


def test_derived_memories_keep_the_turns_place_and_say_where_they_come_from() -> None:
    turn = _turn("user: I prefer podman over docker for containers. Approved, go ahead.")
    pref, ok = derive(turn, context="Shall I upgrade the kernel to 6.8?")
    for d in (pref, ok):
        assert (d.namespace, d.timestamp, d.actor, d.source) == (
            "agent-1", turn.timestamp, "user", "conclusions")
        md = d.metadata.model_extra or {}
        assert md["derived_from"] == "turn-1" and md["session"] == "s-42"
        assert md["speaker"] == "user" and "derived" in d.metadata.tags
        assert d.metadata.host == "laptop" and d.metadata.machine_id == "m1"
        assert is_turn(d) is False  # a derived memory is never read as a turn
    assert (pref.category, pref.subcategory) == ("user_pattern", "preference")
    assert pref.summary == "I prefer podman over docker for containers."
    assert pref.metadata.model_extra["rule"] == "preference.prefer"  # type: ignore[index]
    assert pref.metadata.model_extra["subject"] == "prefers:containers"  # type: ignore[index]
    assert pref.detail == ""
    assert (ok.category, ok.subcategory) == ("approval", "granted")
    assert ok.metadata.model_extra["decision"] == "approved"  # type: ignore[index]
    assert ok.detail == "In reply to: Shall I upgrade the kernel to 6.8?"


def test_ids_are_deterministic_per_turn_rule_and_span() -> None:
    a = [d.id for d in derive(_turn("user: Stop! Never run apt upgrade on a Friday."))]
    b = [d.id for d in derive(_turn("user: Stop! Never run apt upgrade on a Friday."))]
    assert a == b and len(set(a)) == 2 and all(i.startswith("concl-") for i in a)
    other = [d.id for d in derive(_turn("user: Stop! Never run apt upgrade on a Friday.",
                                        id="turn-2"))]
    assert not set(a) & set(other)


def test_a_positive_tool_preference_has_its_familys_subject_a_negative_one_none() -> None:
    [d] = derive(_turn("user: From now on use podman for everything."))
    assert d.metadata.model_extra["subject"] == "prefers:container runtime"  # type: ignore[index]
    [d] = derive(_turn("user: Never use vim on the servers."))
    assert "subject" not in (d.metadata.model_extra or {})


def test_turns_roles_and_texts() -> None:
    assert role_of(_turn("hello there")) == "user"
    assert role_of(_turn("assistant: done", actor="agent")) == "assistant"
    assert role_of(_turn("user: hi", actor="system")) == "user"
    assert role_of(_turn("hi", actor="system")) is None
    long = "word " * 1000
    assert turn_text(_turn("user: " + long[:1990] + "…", detail=long.strip())) == long.strip()
    assert turn_text(_turn("Title", detail="Body text")) == "Title\n\nBody text"
    assert not is_turn(_turn("x", subcategory="note"))
    assert not is_turn(_turn("x", subcategory="session_summary"))
    assert not is_turn(_turn("x", category="diagnosis"))
    assert is_turn(_turn("x", subcategory="general"))


def test_every_rule_is_documented_in_the_readme() -> None:
    from pathlib import Path
    readme = (Path(__file__).parents[3] / "services/recall-api/README.md").read_text()
    for rule in RULES:
        assert f"`{rule.name}`" in readme, rule.name


# --- ranking and the profile ------------------------------------------------------------------
def test_a_derived_memory_goes_just_before_its_turn() -> None:
    keys = ["a", "turn", "b", "d1", "c", "d2"]
    assert derived_first(keys, {"d1": "turn", "d2": "turn"}) == [
        "a", "d1", "d2", "turn", "b", "c"]
    assert derived_first(["d1", "turn"], {"d1": "turn"}) == ["d1", "turn"]  # already first
    assert derived_first(["x", "d1"], {"d1": "turn"}) == ["x", "d1"]  # its turn not ranked


def _pattern(i: str, hours: float, summary: str, **md: object) -> Memory:
    return Memory(id=i, score=0, timestamp=NOW - timedelta(hours=hours), category="user_pattern",
                  subcategory="preference", summary=summary, metadata=dict(md))


def test_the_profile_keeps_the_newest_few_statements_one_per_subject() -> None:
    learned = [_pattern("l1", 30, "User prefers neovim as their editor", subject="prefers:editor",
                        learned=True),
               _pattern("l2", 40, "User's work sessions: Mon–Fri 09:00–12:00 (UTC)",
                        subject="schedule:work_sessions", learned=True)]
    stated = [_pattern(f"s{i}", i, f"statement {i}", derived_from=f"t{i}") for i in range(1, 6)]
    helix = _pattern("s0", 0.5, "I prefer helix as my editor", derived_from="t0",
                     subject="prefers:editor")
    shown = profile([*learned, *stated, helix], limit=8, max_stated=3)
    assert [m.id for m in shown] == ["s0", "s1", "s2", "l2"]  # neovim: replaced by the newer
    assert [m.id for m in profile([*learned, *stated], limit=2, max_stated=3)] == ["s1", "s2"]
    assert [m.id for m in profile([*learned, *stated], limit=8, max_stated=0)] == ["l1", "l2"]


@pytest.mark.parametrize(("query", "cats"), [
    ("what did we conclude about the NAS backup?", {"diagnosis", "approval", "user_pattern"}),
    ("what did we decide about the kernel?", {"diagnosis", "approval", "user_pattern"}),
    ("what was the fix for the VPN drops?", {"diagnosis"}),
    ("what was the root cause of the outage?", {"diagnosis"}),
    # A bare "why did …" is about the machine as often: its events answer, nothing is lifted.
    ("why did the backup fail last week?", set()),
    ("what does the user prefer for containers?", {"user_pattern", "approval"}),
    ("which shell is my favourite?", {"user_pattern", "approval"}),
    ("what did I ask you to always do about backups?", {"user_pattern", "approval"}),
    ("what did we find was wrong with the wifi?", {"diagnosis"}),
    # every form of each verb alike
    ("what did you do to solve the slow builds?", {"diagnosis"}),
    ("how was the NAS backup repaired?", {"diagnosis"}),
    ("are we still fixing the VPN drops?", {"diagnosis"}),
    ("what was the resolution for the wifi drops?", {"diagnosis"}),
    ("who changed /etc/resolv.conf?", set()),
    ("did I approve the kernel upgrade?", {"approval"}),
    ("what is using my CPU right now?", set()),
    ("holiday plans in Lisbon", set()),
])
def test_what_a_question_asks_for(query: str, cats: set[str]) -> None:
    assert asked_categories(query) == cats


def test_the_conclusions_asked_for_come_first_in_their_order() -> None:
    """Routed by `core/intent.py` (a question about a conclusion is one of its intents): the
    diagnoses first, the fix the question asks for before the cause."""
    from totalrecall_recall_api.core.intent import routed_first

    def cand(key: str, score: float, category: str) -> Candidate:
        return Candidate(key, NOW, key, score=score, category=category)

    class R:
        def __init__(self, category: str, subcategory: str = "") -> None:
            self.category, self.subcategory, self.metadata, self.timestamp = \
                category, subcategory, {}, NOW

    rows = {"turn": R("conversation"), "event": R("system.service", "start"),
            "cause": R("diagnosis", "root_cause"), "fix": R("diagnosis", "resolution")}
    ranked = [cand("turn", 0.9, "conversation"), cand("event", 0.8, "system.service"),
              cand("cause", 0.5, "diagnosis"), cand("fix", 0.4, "diagnosis")]
    out = routed_first(ranked, "what was the fix for nginx?", rows.get)
    assert [c.key for c in out] == ["fix", "cause", "turn", "event"]
    assert out[1].components["intent"] == 0.9
    fresh = [cand("turn", 0.9, "conversation"), cand("cause", 0.5, "diagnosis")]
    assert [c.key for c in routed_first(fresh, "nginx port 80", rows.get)] == ["turn", "cause"]
    assert [c.key for c in routed_first(fresh[:1], "what was the fix?", rows.get)] == ["turn"]


@pytest.mark.parametrize(("query", "about"), [
    ("what's my preference regarding the wifi?", {"regarding", "wifi"}),
    ("what did you do to solve the slow builds?", {"slow", "builds"}),
    ("what did we conclude about the flaky wifi (wifi-7)?", {"flaky", "wifi", "7"}),
    ("how did we fix the NAS backup?", {"nas", "backup"}),
])
def test_what_a_question_about_a_conclusion_is_about(query: str, about: set[str]) -> None:
    from totalrecall_recall_api.core.conclusions import asked_about

    assert asked_about(query) == about


def test_of_the_conclusions_asked_for_those_about_the_question_first() -> None:
    """"what's my preference regarding the wifi?": every preference is lifted alike; the one
    that repeats "prefer" does not outrank the one about the wifi. No other memory moves."""
    from totalrecall_recall_api.core.intent import routed_first

    class R:
        def __init__(self, category: str) -> None:
            self.category, self.subcategory, self.metadata, self.timestamp = \
                category, "", {}, NOW

    texts = {"nas": ("From now on I prefer restic over rsync for the NAS backups.", "user_pattern"),
             "turn": ("The wifi keeps dropping, I prefer it fixed today.", "conversation"),
             "wifi": ("Never change the wifi settings without asking me first.", "user_pattern"),
             "build": ("Always run the tests before pushing.", "user_pattern")}
    rows = {k: R(cat) for k, (_, cat) in texts.items()}

    def ranked() -> list[Candidate]:
        return [Candidate(k, NOW, texts[k][0], score=s, category=texts[k][1])
                for k, s in (("nas", 0.9), ("turn", 0.8), ("build", 0.6), ("wifi", 0.5))]

    query = "what's my preference regarding the wifi?"
    out = routed_first(ranked(), query, rows.get)
    assert [c.key for c in out] == ["wifi", "nas", "build", "turn"]
    assert out[0].score == 0.9 + 0.9 and out[0].components["concluded_about"] == 0.4
    assert [c.key for c in routed_first(ranked(), query, rows.get, conclusions_by_topic=False)] \
        == ["nas", "build", "wifi", "turn"]
    # none about the wifi, or all alike: the fused order
    assert [c.key for c in routed_first(ranked(), "what's my preference regarding vim?",
                                        rows.get)] == ["nas", "build", "wifi", "turn"]
