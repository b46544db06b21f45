"""Three weeks of a user's workstation, as the real watchers report it (their own code, with a
clock set to each moment and stand-in sources): logins and logouts (the sessions watcher), an
editor and a build hogging the CPU (the process watcher), and the user's own turns (as the
plugin's auto-capture stores them). Shared by the pattern learner's unit and e2e tests.

Every weekday of three weeks (Mon-Fri): login at 09:05, logout at 17:40; the user asks something
at 09:20 and 14:30; nvim busy at 10:00 (vim instead on two days); `docker build` busy at 11:00;
on Mondays at 09:10 the user asks to "check the nightly backup report".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from totalrecall_schema import MemoryEvent
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.process import ProcessWatcher, ProcSample
from totalrecall_watchers.core.sessions import SessionsWatcher

WEEKS = 3
VIM_DAYS = (2, 7)  # the 3rd and 8th working day: vim, not nvim


def first_monday(weeks_back: int = WEEKS) -> datetime:
    """A Monday, 00:00 UTC: the three weeks end before this week (and within 30 days)."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - timedelta(days=today.weekday() + 7 * weeks_back)


@dataclass
class _Procs:
    samples: list[ProcSample] = field(default_factory=list)

    def sample(self) -> list[ProcSample]:
        return list(self.samples)


class World:
    def __init__(self, namespace: str, start: datetime | None = None) -> None:
        self.start = start or first_monday()
        self.clock = FakeClock(wall=self.start)
        self.ctx = EventContext(namespace=namespace, hostname="workstation", clock=self.clock)
        self.sessions: list[tuple[str, str, str, float]] = []
        self.sessions_watcher = SessionsWatcher(self.ctx, source=lambda: list(self.sessions))
        self.procs = _Procs()
        self.process_watcher = ProcessWatcher(self.ctx, source=self.procs)
        self.events: list[MemoryEvent] = []
        self.sessions_watcher.poll()  # the first poll only learns what is there
        self.process_watcher.poll()
        self._pid = 4000

    def at(self, when: datetime) -> None:
        self.clock.advance((when - self.clock.now()).total_seconds())

    def login(self, when: datetime) -> None:
        self.at(when)
        self.sessions = [("alice", "pts/1", "", when.timestamp())]
        self.events += self.sessions_watcher.poll()

    def logout(self, when: datetime) -> None:
        self.at(when)
        self.sessions = []
        self.events += self.sessions_watcher.poll()

    def busy(self, when: datetime, name: str, cmdline: list[str]) -> None:
        """A process that uses a whole core for a minute, then exits."""
        self._pid += 1
        started = when - timedelta(minutes=1)
        base = ProcSample(pid=self._pid, create_time=started.timestamp(), name=name,
                          cmdline=cmdline, username="alice", cpu_time=0.0, rss=200 << 20,
                          mem_percent=2.0)
        self.at(when - timedelta(seconds=30))
        self.procs.samples = [base]
        self.events += self.process_watcher.poll()
        self.at(when)
        self.procs.samples = [ProcSample(**{**base.__dict__, "cpu_time": 30.0})]
        self.events += self.process_watcher.poll()  # high_cpu
        self.at(when + timedelta(minutes=5))
        self.procs.samples = []
        self.events += self.process_watcher.poll()  # exit

    def says(self, when: datetime, text: str, session: str) -> None:
        """A user turn as the plugin's auto-capture stores it (POST /memory/flush)."""
        self.events.append(MemoryEvent(
            namespace=self.ctx.namespace, timestamp=when, category="conversation",
            subcategory="flush", actor="user", source="flush", summary=f"user: {text}",
            metadata={"session": session, "tags": ["flush"]}))

    def three_weeks(self) -> list[MemoryEvent]:
        day_no = 0
        for week in range(WEEKS):
            for weekday in range(5):
                day = self.start + timedelta(days=7 * week + weekday)
                def h(hh: int, mm: int = 0, day: datetime = day) -> datetime:
                    return day + timedelta(hours=hh, minutes=mm)
                session = f"s-{day:%Y%m%d}"
                self.login(h(9, 5))
                if weekday == 0:
                    self.says(h(9, 10), "check the nightly backup report", session)
                self.says(h(9, 20), f"what failed overnight on day {day_no}?", session)
                editor = ("vim", ["vim", "notes.md"]) if day_no in VIM_DAYS \
                    else ("nvim", ["nvim", "src/main.py"])
                self.busy(h(10), *editor)
                self.busy(h(11), "docker", ["docker", "build", "-t", f"app:{day_no}", "."])
                self.says(h(14, 30), f"review the pull request number {100 + day_no}", session)
                self.logout(h(17, 40))
                day_no += 1
        return self.events
