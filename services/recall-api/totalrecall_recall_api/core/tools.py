"""The tools a user picks one of: editors, shells, terminals, browsers, container runtimes.

One table serves both the pattern learner (which editor does the user run?) and supersession
("the user now prefers neovim" replaces "the user prefers vim": same family, same subject).
"""

from __future__ import annotations

import re

#: family → tool (as shown) → the names it runs as or is called by (lowercase).
FAMILIES: dict[str, dict[str, tuple[str, ...]]] = {
    "editor": {
        "neovim": ("nvim", "neovim"), "vim": ("vim", "vi", "gvim"),
        "emacs": ("emacs", "emacsclient"), "VS Code": ("code", "vscode", "codium"),
        "nano": ("nano",), "helix": ("hx", "helix"), "Sublime Text": ("subl", "sublime_text"),
        "IntelliJ IDEA": ("idea", "intellij"), "Zed": ("zed", "zeditor"),
    },
    "shell": {"bash": ("bash",), "zsh": ("zsh",), "fish": ("fish",), "nushell": ("nu", "nushell")},
    "terminal": {
        "kitty": ("kitty",), "alacritty": ("alacritty",), "wezterm": ("wezterm", "wezterm-gui"),
        "foot": ("foot",), "GNOME Terminal": ("gnome-terminal", "gnome-terminal-server"),
        "Konsole": ("konsole",), "tmux": ("tmux",),
    },
    "browser": {
        "Firefox": ("firefox",), "Chromium": ("chromium", "chromium-browser"),
        "Chrome": ("chrome", "google-chrome"), "Brave": ("brave", "brave-browser"),
    },
    "container runtime": {"docker": ("docker", "dockerd"), "podman": ("podman",)},
}

#: Names too common as plain words to count in prose ("code", "foot", "fish"); they still count
#: as a process or a command.
_AMBIGUOUS_IN_TEXT = frozenset({"code", "vi", "foot", "fish", "nu", "idea", "zed", "chrome",
                                "brave", "kitty", "hx"})

_BY_NAME: dict[str, tuple[str, str]] = {
    alias: (family, tool) for family, tools in FAMILIES.items()
    for tool, aliases in tools.items() for alias in aliases}

_WORD = re.compile(r"[a-z][a-z0-9_+.-]*")


def tool_of(name: str) -> tuple[str, str] | None:
    """(family, tool) of a process or command name (`/usr/bin/nvim` → ("editor", "neovim"))."""
    base = name.strip().lower().rsplit("/", 1)[-1]
    return _BY_NAME.get(base)


def tools_in_text(text: str, *, prose: bool = True) -> list[tuple[str, str]]:
    """The tools a text names, in order, each once. `prose`: leave out the names that are
    ordinary words too ("code", "fish")."""
    out: list[tuple[str, str]] = []
    for word in _WORD.findall(text.lower().replace("vs code", "vscode")):
        word = word.rstrip(".-")
        if prose and word in _AMBIGUOUS_IN_TEXT:
            continue
        found = _BY_NAME.get(word)
        if found is not None and found not in out:
            out.append(found)
    return out
