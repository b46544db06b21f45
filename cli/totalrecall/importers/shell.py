"""Shell history: bash, zsh and fish, one memory per command (`user_pattern/command`).

Formats (told apart by content, not by the file's name):

* bash   one command per line; with `HISTTIMEFORMAT` set, a `#<epoch>` line before each command,
         and every line up to the next `#<epoch>` belongs to that command (multi-line commands).
         Without timestamps the commands get the file's modification time, one second apart
         in file order (so their order survives).
* zsh    `: <epoch>:<seconds>;<command>` (EXTENDED_HISTORY), a line ending in `\\` continues
         the command; bytes after zsh's 0x83 "meta" marker are unescaped (non-ASCII text);
         plain zsh history (no `: ` prefix) is read like bash's.
* fish   `- cmd: <command>` / `  when: <epoch>` / `  paths:` entries (`\\n` and `\\\\` escaped).

Ids: with a timestamp, a hash of the command and its time (the same history read from another
copy of the file adds nothing); without one, of the file's name, the command and how many times
it came before in the file (appending commands keeps the earlier ids; a history trimmed at the
top by HISTSIZE gives those untimed commands new ids).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from .base import Item, Options, file_time, make_event, split_summary_detail, stable_id

_BASH_TS = re.compile(rb"^#(\d{9,11})\s*$")
_ZSH_EXT = re.compile(rb"^: *(\d{9,11}):(\d+);")
_ZSH_META = 0x83


@dataclass(frozen=True)
class Command:
    text: str
    line: int                       # 1-based line of the command's start
    epoch: int | None = None        # seconds since 1970, when the history has it
    duration_s: int | None = None   # zsh's elapsed seconds
    paths: tuple[str, ...] = ()     # fish: the paths the command named


def unmetafy(data: bytes) -> bytes:
    """zsh writes bytes 0x83-0x9f/0xa0-… of non-ASCII text as 0x83 followed by byte ^ 0x20."""
    if _ZSH_META not in data:
        return data
    out = bytearray()
    it = iter(data)
    for b in it:
        if b == _ZSH_META:
            nxt = next(it, None)
            if nxt is not None:
                out.append(nxt ^ 0x20)
        else:
            out.append(b)
    return bytes(out)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def detect(data: bytes) -> str:
    """'fish', 'zsh' or 'bash' from the first non-empty lines."""
    for line in data.splitlines()[:50]:
        if not line.strip():
            continue
        if line.startswith(b"- cmd: "):
            return "fish"
        if _ZSH_EXT.match(line):
            return "zsh"
        if _BASH_TS.match(line):
            return "bash"
    return "bash"


def parse_bash(data: bytes) -> list[Command]:
    out: list[Command] = []
    lines = data.splitlines()
    timed = any(_BASH_TS.match(ln) for ln in lines)
    epoch: int | None = None
    start = 0
    buf: list[str] = []

    def flush() -> None:
        text = "\n".join(buf).strip()
        if text:
            out.append(Command(text, start, epoch))
        buf.clear()

    for n, raw in enumerate(lines, start=1):
        m = _BASH_TS.match(raw)
        if m:
            flush()
            epoch, start = int(m.group(1)), n + 1
            continue
        buf.append(_decode(raw))
        if not timed:  # else every line up to the next stamp: one multi-line command
            start = n
            flush()
    flush()
    return out


def parse_zsh(data: bytes) -> list[Command]:
    data = unmetafy(data)
    out: list[Command] = []
    cur: list[str] = []
    meta: tuple[int, int | None, int | None] | None = None
    for n, raw in enumerate(data.splitlines(), start=1):
        if not cur:
            m = _ZSH_EXT.match(raw)
            if m:
                meta, raw = (n, int(m.group(1)), int(m.group(2))), raw[m.end():]
            else:
                meta = (n, None, None)
        line = _decode(raw)
        if line.endswith("\\"):  # continued on the next line
            cur.append(line[:-1])
            continue
        cur.append(line)
        text = "\n".join(cur).strip()
        cur = []
        if text and meta is not None:
            out.append(Command(text, meta[0], meta[1], meta[2]))
    if cur and meta is not None and "\n".join(cur).strip():
        out.append(Command("\n".join(cur).strip(), meta[0], meta[1], meta[2]))
    return out


def _fish_unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def parse_fish(data: bytes) -> list[Command]:
    out: list[Command] = []
    text: str | None = None
    start = 0
    epoch: int | None = None
    paths: list[str] = []
    in_paths = False

    def flush() -> None:
        if text is not None and text.strip():
            out.append(Command(text.strip(), start, epoch, None, tuple(paths)))

    for n, raw in enumerate(_decode(data).splitlines(), start=1):
        if raw.startswith("- cmd:"):
            flush()
            text, start, epoch, paths, in_paths = _fish_unescape(raw[6:].strip()), n, None, [], \
                False
        elif raw.startswith("  when:"):
            value = raw[7:].strip()
            epoch = int(value) if value.isdigit() else None
            in_paths = False
        elif raw.startswith("  paths:"):
            in_paths = True
        elif in_paths and raw.startswith("    - "):
            paths.append(_fish_unescape(raw[6:].strip()))
    flush()
    return out


PARSERS = {"bash": parse_bash, "zsh": parse_zsh, "fish": parse_fish}


def read_history(path: Path, namespace: str) -> Iterator[Item]:
    data = path.read_bytes()
    shell = detect(data)
    commands = PARSERS[shell](data)
    mtime = file_time(path)
    seen: dict[str, int] = {}
    for i, cmd in enumerate(commands):
        where = f"{path}:{cmd.line}"
        if cmd.epoch is not None:
            ts = datetime.fromtimestamp(cmd.epoch, UTC)
            event_id = stable_id("shell", shell, cmd.epoch, cmd.text)
        else:
            ts = mtime - timedelta(seconds=len(commands) - 1 - i)
            nth = seen[cmd.text] = seen.get(cmd.text, 0) + 1
            event_id = stable_id("shell", shell, path.name, cmd.text, nth)
        summary, detail = split_summary_detail(f"$ {cmd.text}")
        meta: dict[str, object] = {"shell": shell, "history_file": path.name,
                                   "tags": ["shell", shell]}
        if cmd.duration_s is not None:
            meta["duration_ms"] = cmd.duration_s * 1000
        if cmd.paths:
            meta["paths"] = list(cmd.paths)[:20]
        if cmd.epoch is None:
            meta["time_from"] = "file modification time"
        yield make_event(where, id=event_id, namespace=namespace, timestamp=ts,
                         category="user_pattern", subcategory="command", actor="user",
                         source="shell", summary=summary, detail=detail, metadata=meta)


def default_histories() -> list[Path]:
    home = Path.home()
    cands = [home / ".bash_history", home / ".zsh_history", home / ".histfile",
             home / ".local" / "share" / "fish" / "fish_history"]
    return [p for p in cands if p.is_file()]


class ShellImporter:
    name = "shell"
    help = "shell history: bash (with #<epoch> lines), zsh extended history, fish " \
           "(default: the ones in your home)"

    def read(self, paths: list[Path], opts: Options) -> Iterator[Item]:
        files = paths or default_histories()
        if not files:
            raise FileNotFoundError("no shell history in your home (~/.bash_history, "
                                    "~/.zsh_history, ~/.local/share/fish/fish_history): "
                                    "give the file")
        for path in files:
            yield from read_history(path, opts.namespace or "default")
