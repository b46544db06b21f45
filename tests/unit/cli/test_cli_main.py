"""`totalrecall rebuild` is the documented rebuild (commands/rebuild: online or offline)."""

from __future__ import annotations

import pytest
from totalrecall import main as cli
from totalrecall.commands import rebuild


def test_rebuild_runs_the_rebuild_command_with_its_options(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str] | None] = []

    def fake_rebuild(argv: list[str] | None = None) -> int:
        seen.append(argv)
        return 3

    monkeypatch.setattr(rebuild, "main", fake_rebuild)
    assert cli.main(["rebuild", "--offline", "--progress", "plain"]) == 3
    assert seen == [["--offline", "--progress", "plain"]]


def test_rebuild_help_is_the_rebuild_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["rebuild", "--help"])
    assert done.value.code == 0
    assert "--offline" in capsys.readouterr().out


def test_supersede_posts_the_old_id_and_the_new_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from totalrecall import main as cli
    from totalrecall.commands import supersede

    sent: list[tuple[str, dict[str, object]]] = []
    monkeypatch.setattr(supersede, "post_json",
                        lambda path, body, timeout=600.0: sent.append((path, body)) or 0)
    assert cli.main(["supersede", "m-1", "User now prefers neovim", "--namespace", "ops"]) == 0
    assert sent == [("/memory/supersede", {"old_id": "m-1", "namespace": "ops",
                                           "new": {"summary": "User now prefers neovim"}})]
