"""inotify on a watched tmp dir → file events on the real stream; noise is skipped."""

from __future__ import annotations

from pathlib import Path

from totalrecall_schema import Topology
from watchers_it_helpers import StreamReader, make_settings, running, wait_until, watch_started


async def test_create_and_delete_become_file_events(nats_url: str, topology: Topology,
                                                    tr_home: Path, tmp_path: Path,
                                                    reader: StreamReader) -> None:
    watched = tmp_path / "watched"
    (watched / ".git").mkdir(parents=True)
    settings = make_settings(nats_url, topology, tr_home, enable=("filesystem",))
    settings.filesystem.paths = [str(watched)]
    settings.filesystem.debounce_ms = 100
    async with running(settings) as app:
        runner = app.state.runner
        await wait_until(lambda: runner.status["filesystem"].state == "running", 10, "watcher")
        publisher = app.state.publisher
        await wait_until(lambda: publisher.connected, 10, "NATS")
        await watch_started(reader, watched)
        (watched / ".git" / "index").write_text("noise")
        (watched / "notes.txt.swp").write_text("noise")
        target = watched / "configuration.nix"
        target.write_text("{ services.postgresql.enable = true; }\n")
        ev, _ = await reader.wait_for(
            lambda e: e.category == "file" and e.subcategory == "create"
            and e.metadata.path == str(target), 20, "file/create")
        assert ev.summary == f"Created {target}"
        target.unlink()
        await reader.wait_for(
            lambda e: e.category == "file" and e.subcategory == "delete"
            and e.metadata.path == str(target), 20, "file/delete")
        paths = [e.metadata.path or "" for e in await reader.events()]
        assert not any(".git" in p or p.endswith(".swp") for p in paths), paths
