"""More workstation scenarios: the questions an OS agent gets about pressure ("why is my machine
slow?"), who changed a file, and what could be cleaned up. As in `workstation.py`, every event
is made for real on this machine and reaches the stack only through its watchers:

* pressure — a real process keeps enough memory resident to push the machine's used memory
  past the pressure watcher's threshold (set ten points above what is used when the stack
  starts); the watcher's event names the top processes of that moment, the ballast first.
* who changed a file — real processes, each with its own command line, write config files in
  the watched tree; as root the filesystem watcher learns each writer from the kernel
  (fanotify). Without root the kind is left out (said in the log).
* reclaimable space — real cache files (a journal, pip's and npm's caches, an apt archive)
  under a root the reclaimable watcher measures; its report says how much each holds and the
  command that frees it.
* security — sudo (a command run as root, wrong passwords, a user not in sudoers), a failed su,
  a new account and a group membership, as lines in the auth log's real format that a real
  process appends to the file the security watcher tails (as the ssh burst of
  `workstation.py`: this machine's own PAM stack logs nowhere a test may write).
* what a conversation concluded — agent conversations come in as turns (the OpenClaw plugin,
  `POST /memory/ingest`); in each, the user and the agent find a cause, apply a fix and the user
  states a preference. The recall API derives those conclusions from the turns.

Each kind asks its scenario many ways (`PHRASINGS`): a question is a phrasing filled with the
scenario's names. Gold answers are predicates on the recalled memories, as in `workstation.py`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .client import RecallClient

Memory = dict[str, Any]
Pred = Callable[[Memory], bool]
Log = Callable[[str], None]


def _md(m: Memory) -> dict[str, Any]:
    return m.get("metadata") or {}


def _text(m: Memory) -> str:
    return f"{m.get('summary', '')}\n{m.get('detail', '')}"


@dataclass
class KindWorld:
    """What the scenarios made, for their questions."""
    values: dict[str, Any] = field(default_factory=dict)
    running: list[subprocess.Popen[bytes]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    #: What to undo once the questions are asked (the containers made)
    closers: list[Callable[[], None]] = field(default_factory=list)

    def stop(self) -> None:
        for p in self.running:
            if p.poll() is None:
                p.kill()
                p.wait()
        for close in self.closers:
            close()


# --- the stack's settings for these scenarios ----------------------------------------------------
def memory_used_percent() -> float:
    import psutil

    return float(psutil.virtual_memory().percent)


def stack_env(root: Path) -> dict[str, str]:
    """Watcher settings the scenarios need (added to `workstation.Paths.stack_env`)."""
    from .workstation_containers import stack_env as containers_env

    # Over what the stack itself will add as it starts (its models, Postgres): only the
    # scenario's ballast crosses it.
    threshold = min(95.0, memory_used_percent() + 10.0)
    return {
        "TR_WATCHERS_PRESSURE__INTERVAL_S": "1",
        "TR_WATCHERS_PRESSURE__MEMORY_PERCENT": f"{threshold:.1f}",
        "TR_WATCHERS_PRESSURE__MEMORY_CRITICAL_PERCENT": "0",
        # The other pressures off: the scenario is the memory one (CPU hogs of the other
        # scenarios would cross the CPU and load lines at random moments).
        "TR_WATCHERS_PRESSURE__SWAP_PERCENT": "0", "TR_WATCHERS_PRESSURE__SWAP_PAGES_PER_S": "0",
        "TR_WATCHERS_PRESSURE__PSI_CPU_SOME": "0", "TR_WATCHERS_PRESSURE__PSI_MEMORY_SOME": "0",
        "TR_WATCHERS_PRESSURE__PSI_MEMORY_FULL": "0", "TR_WATCHERS_PRESSURE__PSI_IO_SOME": "0",
        "TR_WATCHERS_PRESSURE__LOAD_PER_CORE": "0",
        "TR_WATCHERS_SECURITY__JOURNALD": "false",
        "TR_WATCHERS_SECURITY__LOG_FILES": json.dumps([str(root / "logs" / "auth.log")]),
        "TR_WATCHERS_SECURITY__LOG_POLL_S": "0.2",
        "TR_WATCHERS_RECLAIMABLE__ROOT": str(root / "machine"),
        "TR_WATCHERS_RECLAIMABLE__INTERVAL_S": "1",
        "TR_WATCHERS_RECLAIMABLE__MIN_TOTAL_BYTES": str(4 * 2**20),
        **containers_env(),
    }


def wait_recallable(client: RecallClient, query: str, pred: Pred, timeout: float,
                    namespace: str = "default") -> Memory:
    deadline = time.monotonic() + timeout
    while True:
        mems, _, _ = client.recall(query, namespace, max_results=10)
        for m in mems:
            if pred(m):
                return m
        if time.monotonic() > deadline:
            raise TimeoutError(f"not recallable within {timeout}s: {query!r}")
        time.sleep(0.5)


# --- pressure ------------------------------------------------------------------------------------
BALLAST = ("import sys, time\nblock = bytearray(int(sys.argv[1]))\n"
           "for i in range(0, len(block), 4096): block[i] = 1\nprint('ready', flush=True)\n"
           "time.sleep(3600)\n")


def make_pressure(client: RecallClient, w: KindWorld, threshold: float, marker: str,
                  log: Log, timeout: float) -> None:
    import psutil

    vm = psutil.virtual_memory()
    need = (threshold + 2.0 - vm.percent) / 100.0 * vm.total
    size = int(max(256 * 2**20, min(need, 0.5 * vm.available)))
    ballast = subprocess.Popen([sys.executable, "-c", BALLAST, str(size), f"ballast-{marker}"],
                               stdout=subprocess.PIPE)
    w.running.append(ballast)  # type: ignore[arg-type]
    assert ballast.stdout is not None and ballast.stdout.readline().strip() == b"ready"
    pid = ballast.pid
    w.values["pressure"] = {"pid": pid, "mb": size // 2**20}
    wait_recallable(client, "why is my machine slow? memory pressure", pressure_gold(pid),
                    timeout)
    log(f"[workstation] memory pressure recorded (ballast {size // 2**20} MB, pid {pid})")


def pressure_gold(pid: int) -> Pred:
    """The pressure event that names the ballast as the top memory user, or the process
    watcher's own report of the ballast's memory: either answers "what is eating my RAM?"."""
    def gold(m: Memory) -> bool:
        top = _md(m).get("top_rss") or {}
        if m.get("category") == "system.pressure" and m.get("subcategory") == "memory":
            return top.get("pid") == pid or f"(PID {pid})" in _text(m)
        return m.get("category") == "system.process" and m.get("subcategory") == "high_mem" \
            and f"(PID {pid})" in m.get("summary", "")
    return gold


PRESSURE_PHRASINGS = [
    "why is my machine slow?", "why is everything so sluggish right now?",
    "the computer is crawling, what's going on?", "what's eating all my RAM?",
    "which process is using the most memory?", "is the system under memory pressure?",
    "why is my laptop lagging?", "what is hogging memory right now?",
    "am I running out of memory?", "why is the desktop so unresponsive?",
    "what's using up all the memory", "memory is almost full, who's responsible?",
    "what's the biggest memory user at the moment?", "is something leaking memory?",
    "why does everything take forever to open?", "what made the machine slow down?",
    "which program is the memory hog?", "how much memory is in use and by what?",
    "did the box hit memory pressure?", "why is free memory so low?",
    "what's the top process by RSS?", "what's consuming RAM on this workstation?",
    "high memory usage — what's the culprit?", "my system feels slow, any idea why?",
    "was there a memory pressure alert?", "which process should I kill to free memory?",
    "why is swap about to kick in?", "what's making the machine struggle?",
    "why is it so slow today", "RAM usage is high, what's the top offender?",
    "who is using so much memory", "is there a process with a huge resident set?",
    "tell me why my PC is slow", "what's behind the slowdown?",
    "memory usage spiked, what happened?", "why is the fan spinning and everything slow?",
    "which app takes up the most RAM right now", "what's the memory situation?",
    "is memory the reason the machine is slow?", "what's pressuring memory?",
    "find the process eating memory", "why are apps getting slow to respond?",
    "what's the heaviest process in memory?", "slow machine: what's the cause?",
    "what is using a lot of RAM", "show me the top memory consumer",
    "is anything hogging resources?", "why did the system get slow a moment ago?",
    "what's wrong with performance right now?", "which process grew so large in memory?",
    "what should I close to speed things up?", "memory pressure: what's the top process?",
    "why is my workstation so slow?", "what's filling up memory?",
    "is the box out of RAM?", "which pid uses the most memory?",
    "why is the system low on memory?", "explain the slowness",
    "what is the memory hog on this machine?", "what's making everything lag?",
]


# --- who changed a file ------------------------------------------------------------------------
WRITER = ("import sys, time\n"
          "f = open(sys.argv[1], 'a')\n"
          "f.write('# changed by ' + sys.argv[2] + chr(10)); f.flush(); time.sleep(1.5)\n"
          "f.close()\n")


def make_writers(client: RecallClient, w: KindWorld, watched: Path, marker: str, log: Log,
                 timeout: float) -> None:
    if os.geteuid() != 0:
        w.skipped["who-changed"] = "the kernel names a file's writer to root only (fanotify)"
        log(f"[workstation] who-changed left out: {w.skipped['who-changed']}")
        return
    files = []
    for i, (svc, tool) in enumerate((("nginx", "deploy-tool"), ("haproxy", "ansible-run"),
                                     ("redis", "config-sync"))):
        conf = watched / f"{svc}-{marker}.conf"
        conf.write_text(f"# {svc}\n")  # made by the eval itself (its own writes are not named)
        time.sleep(0.3)
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(conf),
                                  f"{tool}-{marker}-{i}"])
        files.append({"svc": svc, "tool": tool, "conf": conf.name, "path": str(conf),
                      "pid": child.pid, "arg": f"{tool}-{marker}-{i}"})
        wait_recallable(client, f"who changed {conf.name}", writer_gold(str(conf), child.pid),
                        timeout)
        child.wait(30)
    w.values["writers"] = files
    log("[workstation] file writers recorded")


def writer_gold(path: str, pid: int) -> Pred:
    def gold(m: Memory) -> bool:
        by = _md(m).get("changed_by") or {}
        return m.get("category") == "file" and _md(m).get("path") == path and by.get("pid") == pid
    return gold


WRITER_PHRASINGS = [
    "who changed {conf}?", "which process modified {conf}?", "what edited {conf}?",
    "who touched the {svc} config?", "what command changed {conf}",
    "who wrote to {conf} last?", "which program rewrote the {svc} configuration?",
    "what modified {svc}'s config file?", "who made the latest change to {conf}?",
    "was {conf} changed by a script?", "which tool edited {conf}",
    "who is responsible for the change in {conf}?", "what process wrote {conf}",
    "how did {conf} get modified?", "who updated the {svc} config",
    "which user changed {conf}?", "what changed {conf} and with which command?",
    "who last edited {conf}", "find out who modified {conf}",
    "what was the command that modified the {svc} configuration?",
]


# --- reclaimable space -------------------------------------------------------------------------
def make_reclaimable(client: RecallClient, w: KindWorld, machine: Path, marker: str,
                     log: Log, timeout: float) -> None:
    """Real files in the places the watcher measures (under its own root)."""
    sizes = {"var/log/journal/m/system.journal": 6, "root/.cache/pip/http/a/b": 3,
             "root/.npm/_cacache/content-v2/x": 2, "var/cache/apt/archives/big.deb": 5}
    for rel, mb in sizes.items():
        path = machine / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.write(os.urandom(mb * 2**20))
    w.values["reclaimable"] = {"marker": marker}
    wait_recallable(client, "how much disk space could be reclaimed?", reclaimable_gold(),
                    timeout)
    log("[workstation] reclaimable space recorded")


def reclaimable_gold() -> Pred:
    def gold(m: Memory) -> bool:
        return m.get("category") == "system.storage" and m.get("subcategory") == "reclaimable" \
            and "could be reclaimed" in m.get("summary", "")
    return gold


#: What only the machine's report measures: its caches, journal, logs and package archives (not
#: "/var": the container engine's storage is there too).
_NAMES_MACHINE_SPACE = re.compile(r"\b(?:journal|logs?|cach\w*|pip|npm|apt|packages?|"
                                  r"temporary|old)\b", re.IGNORECASE)


def reclaimable_question_gold(phrasing: str) -> Pred:
    """The gold of a reclaimable question. One that names what to clean ("how big is the
    journal?", "which caches …") asks for the machine's report. One that does not ("is there
    anything I can prune?", "what's reclaimable right now?") is answered as well by the
    container engine's report of what it could free (`podman system prune`): real space, on
    this machine mostly more than the caches (120 GB of unused images beside 16 MiB of caches
    when this was written), so a person asking would take either first, and either is gold."""
    machine = reclaimable_gold()
    if _NAMES_MACHINE_SPACE.search(phrasing):
        return machine

    def gold(m: Memory) -> bool:
        return machine(m) or (m.get("category") == "system.container"
                              and m.get("subcategory") == "disk"
                              and "could be reclaimed" in m.get("summary", ""))
    return gold


RECLAIMABLE_PHRASINGS = [
    "what can I clean up to free disk space?", "how much space could I reclaim?",
    "what's safe to delete to free up space?", "which caches are taking up disk?",
    "how big is the journal?", "can I free some disk space somewhere?",
    "what's wasting disk space?", "is there anything I can prune?",
    "how much does the pip cache take?", "what's using space that I don't need?",
    "the disk is getting full, what can go?", "what cleanup would free the most space?",
    "how do I free up disk space?", "which old files or caches can be removed?",
    "is the apt cache big?", "how much is reclaimable on this machine?",
    "what are the biggest things I could clean?", "what can I vacuum or purge?",
    "give me cleanup suggestions for the disk", "where is disk space being wasted?",
    "what would `apt-get clean` free?", "how large are the package caches?",
    "could I shrink the systemd journal?", "npm cache size?",
    "what commands would free disk space?", "any reclaimable space?",
    "what's taking space in caches and logs?", "how much room can I get back?",
    "what should I delete first to get space back?", "disk cleanup: where to start?",
    "are the caches worth clearing?", "how much space do logs and caches use?",
    "is there junk I can delete?", "what would free a few gigabytes?",
    "which cache is the largest?", "what can be safely purged?",
    "suggest ways to reclaim storage", "is the journal taking too much space?",
    "how much could `pip cache purge` free?", "what's cluttering the disk?",
    "what's reclaimable right now?", "how do I get disk space back without losing data?",
    "what temporary stuff can I throw away?", "where can I free space quickly?",
    "what occupies the most cache space?", "do I have big caches lying around?",
    "how much space are old packages using?", "what can I clear to make room?",
    "which cleanup commands should I run?", "is there space to recover on this box?",
    "what's using disk that isn't my data?", "how big are the logs?",
    "can the apt archives be cleaned?", "what's the quickest space win?",
    "list what could be reclaimed", "free disk space tips for this machine",
    "what's eating disk in /var?", "how much room do the caches take?",
    "is cleaning caches going to help?", "what can I prune to avoid a full disk?",
]


# --- security ----------------------------------------------------------------------------------
def _auth_line(ident: str, pid: int, msg: str) -> str:
    from datetime import datetime

    now = datetime.now()
    return f"{now:%b} {now.day:>2} {now:%H:%M:%S} ws {ident}[{pid}]: {msg}"


def make_security(client: RecallClient, w: KindWorld, auth_log: Path, marker: str, log: Log,
                  timeout: float) -> None:
    from .workstation import log_lines

    u = {k: f"{k}{marker}" for k in ("alice", "bob", "carol", "dave", "eve")}
    unit = f"nginx-{marker}"
    log_lines(auth_log, [
        _auth_line("sudo", 4321, f"   {u['alice']} : TTY=pts/0 ; PWD=/home/{u['alice']} ; "
                                 f"USER=root ; COMMAND=/usr/bin/systemctl restart {unit}"),
        _auth_line("sudo", 4330, f"    {u['bob']} : 3 incorrect password attempts ; TTY=pts/1 ; "
                                 f"PWD=/home/{u['bob']} ; USER=root ; "
                                 f"COMMAND=/usr/bin/apt install telnet"),
        _auth_line("sudo", 4340, f"  {u['carol']} : user NOT in sudoers ; TTY=pts/2 ; "
                                 f"PWD=/home/{u['carol']} ; USER=root ; COMMAND=/bin/cat /etc/shadow"),
        _auth_line("su", 4350, f"FAILED SU (to root) {u['dave']} on pts/3"),
        _auth_line("useradd", 4360, f"new user: name={u['eve']}, UID=1005, GID=1005, "
                                    f"home=/home/{u['eve']}, shell=/bin/bash, from=/dev/pts/0"),
        _auth_line("usermod", 4370, f"add '{u['eve']}' to group 'docker'"),
    ])
    w.values["security"] = {"u": u, "unit": unit}
    wait_recallable(client, f"was {u['eve']} added to the docker group?",
                    security_gold(u["eve"], "docker"), timeout)
    wait_recallable(client, f"what did {u['alice']} run with sudo?",
                    security_gold(u["alice"], unit), timeout)
    log("[workstation] security events recorded")


def security_gold(*needles: str) -> Pred:
    def gold(m: Memory) -> bool:
        return m.get("category") == "security" and all(n in _text(m) for n in needles)
    return gold


SECURITY_QUESTIONS = [
    # (phrasing, needles of the gold memory)
    ("who used sudo to restart {unit}?", ("{alice}", "{unit}")),
    ("what did {alice} run with sudo?", ("{alice}", "{unit}")),
    ("which commands did {alice} run as root?", ("{alice}", "{unit}")),
    ("did someone restart {unit} with sudo?", ("{alice}", "{unit}")),
    ("who restarted {unit} as root", ("{alice}", "{unit}")),
    ("show sudo usage by {alice}", ("{alice}",)),
    ("what privileged command did {alice} execute?", ("{alice}", "{unit}")),
    ("was sudo used on {unit}?", ("{alice}", "{unit}")),
    ("did {alice} become root?", ("{alice}",)),
    ("what root commands were run for {unit}", ("{alice}", "{unit}")),
    ("did {bob} enter the wrong sudo password?", ("{bob}",)),
    ("any failed sudo attempts by {bob}?", ("{bob}",)),
    ("who failed to authenticate with sudo as {bob}?", ("{bob}",)),
    ("why was {bob}'s sudo refused?", ("{bob}",)),
    ("how many wrong passwords did {bob} type?", ("{bob}", "3")),
    ("did {bob} try to install telnet?", ("{bob}", "telnet")),
    ("who tried to install telnet as root?", ("{bob}", "telnet")),
    ("sudo failures for {bob}", ("{bob}",)),
    ("was {bob} denied root access?", ("{bob}",)),
    ("incorrect sudo password by {bob}", ("{bob}",)),
    ("is {carol} in the sudoers file?", ("{carol}",)),
    ("who tried to read /etc/shadow?", ("{carol}", "/etc/shadow")),
    ("did {carol} try to use sudo?", ("{carol}",)),
    ("which user is not allowed to sudo, {carol}?", ("{carol}",)),
    ("why couldn't {carol} run sudo?", ("{carol}",)),
    ("did anyone try to cat /etc/shadow as {carol}?", ("{carol}", "/etc/shadow")),
    ("who attempted to access the shadow file", ("{carol}", "/etc/shadow")),
    ("was {carol} refused by sudo?", ("{carol}",)),
    ("unauthorized sudo attempt by {carol}", ("{carol}",)),
    ("did {carol} get root?", ("{carol}",)),
    ("did {dave} try to become root?", ("{dave}",)),
    ("failed su attempts by {dave}", ("{dave}",)),
    ("who tried su to root, {dave}?", ("{dave}",)),
    ("did {dave}'s su fail?", ("{dave}",)),
    ("was there a failed su on pts/3?", ("{dave}",)),
    ("did {dave} switch user to root successfully?", ("{dave}",)),
    ("any su failures from {dave}?", ("{dave}",)),
    ("who failed to switch to root as {dave}", ("{dave}",)),
    ("{dave} su denied?", ("{dave}",)),
    ("did {dave} get the root password wrong?", ("{dave}",)),
    ("was a new account {eve} created?", ("{eve}",)),
    ("when was the user {eve} added?", ("{eve}",)),
    ("who added the user {eve}?", ("{eve}",)),
    ("is there a new user {eve} on this machine?", ("{eve}",)),
    ("what is {eve}'s home directory?", ("{eve}", "/home/{eve}")),
    ("which shell does {eve} have?", ("{eve}", "/bin/bash")),
    ("what UID was given to {eve}?", ("{eve}", "1005")),
    ("new accounts created recently: {eve}?", ("{eve}",)),
    ("did someone create a login for {eve}?", ("{eve}",)),
    ("account {eve} created?", ("{eve}",)),
    ("was {eve} added to the docker group?", ("{eve}", "docker")),
    ("who was added to the docker group ({eve})?", ("{eve}", "docker")),
    ("is {eve} a member of docker?", ("{eve}", "docker")),
    ("which groups was {eve} put in?", ("{eve}", "docker")),
    ("did {eve} get docker access?", ("{eve}", "docker")),
    ("group membership changes for {eve}", ("{eve}", "docker")),
    ("who can use docker now, {eve}?", ("{eve}", "docker")),
    ("when did {eve} join the docker group?", ("{eve}", "docker")),
    ("was {eve} granted docker group rights?", ("{eve}", "docker")),
    ("usermod changes for {eve}", ("{eve}", "docker")),
]


# --- what a conversation concluded ---------------------------------------------------------------
CONVERSATIONS = [
    {"topic": "nas", "thing": "the NAS backup", "turns": [
        ("user", "The nightly backup to the NAS {m} failed again, can you look?"),
        ("assistant", "The root cause was an expired SSH key on the NAS {m} backup target."),
        ("assistant", "I fixed it by rotating the key and re-running the {m} backup job."),
        ("user", "From now on I prefer restic over rsync for the {m} backups.")]},
    {"topic": "wifi", "thing": "the flaky wifi", "turns": [
        ("user", "The wifi on the laptop {m} keeps dropping every few minutes."),
        ("assistant", "It failed because power saving was turning the {m} radio off."),
        ("assistant", "I fixed it by disabling wifi power saving for the {m} adapter."),
        ("user", "Never change the {m} network settings without asking me first.")]},
    {"topic": "build", "thing": "the slow builds", "turns": [
        ("user", "Why are the {m} builds suddenly so slow?"),
        ("assistant", "The problem is that the {m} build cache was disabled by the last update."),
        ("assistant", "Fixed by turning the {m} build cache back on in the CI config."),
        ("user", "Always run the {m} tests before pushing, please.")]},
]

CONCLUSION_PHRASINGS = {
    "cause": ["what did we conclude about {thing} ({m})?", "what was the root cause of {thing} {m}?",
              "why did {thing} {m} break?", "what did we find was wrong with {thing} {m}?",
              "what caused {thing} {m}?", "what was the diagnosis for {m}?",
              "remind me why {thing} {m} went wrong"],
    "fix": ["how did we fix {thing} {m}?", "what fix was applied for {m}?",
            "what did you do to solve {thing} {m}?", "how was {thing} {m} resolved?",
            "what was the solution for {m}?", "what change fixed {thing} {m}?",
            "did we fix {thing} {m}, and how?"],
    "preference": ["what does the user prefer about {m}?", "what did I ask you to always or "
                   "never do about {m}?", "what's my preference regarding {m}?",
                   "any rules I set about {m}?", "what did I say I want for {m} from now on?",
                   "how do I like {m} handled?"],
}


def make_conversations(client: RecallClient, w: KindWorld, marker: str, log: Log,
                       timeout: float, namespace: str = "default") -> None:
    from datetime import UTC, datetime

    made = []
    for c in CONVERSATIONS:
        m = f"{c['topic']}{marker}"
        session = f"sess-{m}"
        events = [{"id": f"{session}-{i}", "summary": text.format(m=m), "category": "conversation",
                   "actor": "user" if role == "user" else "agent", "namespace": namespace,
                   "timestamp": datetime.now(UTC).isoformat(),
                   "metadata": {"session": session, "turn": i, "role": role}}
                  for i, (role, text) in enumerate(c["turns"])]
        client.ingest(events)
        made.append({"m": m, "topic": c["topic"], "thing": c["thing"], "session": session})
        wait_recallable(client, f"how did we fix {c['thing']} {m}?",
                        conclusion_gold(session, "diagnosis", "resolution"), timeout, namespace)
    w.values["conversations"] = made
    log("[workstation] conversations and their conclusions recorded")


def conclusion_gold(session: str, category: str, subcategory: str | None = None) -> Pred:
    """A conclusion the recall API derived from a turn of that conversation, of that kind. A
    standing rule the user set ("never change X without asking me first") answers a question
    about their preferences whether it was read as a preference or as a refusal."""
    categories = {category, "approval"} if category == "user_pattern" else {category}

    def gold(x: Memory) -> bool:
        md = _md(x)
        return bool(md.get("derived_from")) and md.get("session") == session \
            and x.get("category") in categories \
            and (subcategory is None or x.get("subcategory") == subcategory)
    return gold


def split_of(phrasing: str, scenario_dev: bool = True) -> str:
    """"dev" or "held-out": a question is dev when its phrasing (the template, before names are
    filled in) falls in the dev half (`folds.half_of`) and its scenario is a dev one; a phrasing
    or a scenario held out makes it held-out. Ranking is tuned on the dev half only."""
    from .folds import half_of

    return "dev" if scenario_dev and half_of(phrasing) == "A" else "held-out"


#: Scenarios of a kind held out (their questions are held-out, whatever the phrasing).
HELD_OUT_WRITERS = frozenset({"redis"})
HELD_OUT_USERS = frozenset({"dave", "eve"})
HELD_OUT_TOPICS = frozenset({"build"})


def questions(w: KindWorld, make_question: Callable[..., Any]) -> list[Any]:
    """Every phrasing of each kind's scenario (`make_question(kind, text, gold, stale=…,
    split=…)`)."""
    from . import workstation_containers as containers

    qs: list[Any] = []
    if "pressure" in w.values:
        gold = pressure_gold(w.values["pressure"]["pid"])
        qs += [make_question("pressure", q, gold, split=split_of(q)) for q in PRESSURE_PHRASINGS]
    for f in w.values.get("writers", []):
        gold = writer_gold(f["path"], f["pid"])
        dev = f["svc"] not in HELD_OUT_WRITERS
        qs += [make_question("who-changed", q.format(conf=f["conf"], svc=f["svc"]), gold,
                             split=split_of(q, dev)) for q in WRITER_PHRASINGS]
    if "reclaimable" in w.values:
        qs += [make_question("reclaimable", q, reclaimable_question_gold(q), split=split_of(q))
               for q in RECLAIMABLE_PHRASINGS]
    if "security" in w.values:
        names = {**w.values["security"]["u"], "unit": w.values["security"]["unit"]}
        for text, needles in SECURITY_QUESTIONS:
            gold = security_gold(*(n.format(**names) for n in needles))
            dev = not any("{" + u + "}" in text for u in HELD_OUT_USERS)
            qs.append(make_question("security", text.format(**names), gold,
                                    split=split_of(text, dev)))
    golds = {"cause": ("diagnosis", "root_cause"), "fix": ("diagnosis", "resolution"),
             "preference": ("user_pattern", None)}
    for c in w.values.get("conversations", []):
        dev = c.get("topic") not in HELD_OUT_TOPICS
        for what, phrasings in CONCLUSION_PHRASINGS.items():
            gold = conclusion_gold(c["session"], *golds[what])
            qs += [make_question("concluded", q.format(thing=c["thing"], m=c["m"]), gold,
                                 split=split_of(q, dev)) for q in phrasings]
    qs += containers.questions(w.values, lambda text, gold, stale, dev, phrasing: make_question(
        "containers", text, gold, stale=stale, split=split_of(phrasing, dev)))
    return qs
