"""This machine's real pressure, with thresholds low enough that it crosses them →
`system.pressure` on the real events stream, with the top-process snapshot of that moment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import nats
from totalrecall_schema import MemoryEvent, Severity, Topology
from watchers_it_helpers import StreamReader, make_settings, running, wait_until

# A child that keeps 256 MiB resident and one core busy while the snapshot is taken: the top
# process by RSS is at least this big, the top one by CPU uses some.
HOG = ("import sys, time\nblock = bytearray(256 * 1024 * 1024)\n"
       "for i in range(0, len(block), 4096): block[i] = 1\nprint('ready', flush=True)\n"
       "while True: pass\n")


async def test_low_thresholds_cross_on_this_machine(nats_url: str, topology: Topology,
                                                    tr_home: Path, reader: StreamReader) -> None:
    settings = make_settings(nats_url, topology, tr_home, enable=("pressure",))
    p = settings.pressure
    p.interval_s = 0.5
    p.memory_percent = 1.0  # any machine uses more than 1 % of its memory
    p.memory_critical_percent = 0.0
    p.load_per_core = 0.0001
    # The rest off: the event must not depend on what else this machine does right now.
    p.swap_percent = p.swap_pages_per_s = 0.0
    p.psi_cpu_some = p.psi_memory_some = p.psi_memory_full = p.psi_io_some = 0.0
    p.top_sample_s = 0.5
    hog = subprocess.Popen([sys.executable, "-c", HOG], stdout=subprocess.PIPE, text=True)
    try:
        assert hog.stdout is not None and hog.stdout.readline().strip() == "ready"
        async with running(settings) as app:
            runner = app.state.runner
            ev, headers = await reader.wait_for(
                lambda e: e.category == "system.pressure" and e.subcategory == "memory", 30,
                "system.pressure/memory")
            await wait_until(lambda: runner.status["pressure"].last_poll_at is not None, 10,
                             "a pressure poll")
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://w") as client:
                health = (await client.get("/health")).json()
            # Once per crossing: the pressure stays, the next polls report nothing more.
            first = runner.status["pressure"].last_poll_at or 0.0
            await wait_until(lambda: (runner.status["pressure"].last_poll_at or 0) > first + 1.5,
                             15, "three more polls")
    finally:
        hog.kill()
        hog.wait()

    assert ev.source == "watcher.pressure" and ev.severity == Severity.WARNING
    assert headers.get("Nats-Msg-Id") == ev.key
    x = ev.metadata.model_extra or {}
    assert x["pressure"] == "memory_percent" and x["threshold"] == 1.0
    assert x["value"] >= 1.0 and x["memory_total_mb"] > 0
    assert ev.summary.startswith("System under memory")
    assert "memory" in ev.summary and "% used" in ev.summary
    if x["load_per_core"] >= 0.0001:
        assert "load_per_core" in x["pressures"]
    # The snapshot: the top processes by RSS and CPU at that moment, named in the text too.
    top_rss, top_cpu = x["top_rss"], x["top_cpu"]
    assert top_rss["rss_mb"] >= 256 * 0.9, top_rss  # the hog is one of the candidates
    assert top_cpu["cpu_percent"] > 0 and isinstance(top_cpu["pid"], int)
    assert 1 <= len(x["top_rss_processes"]) <= 5 and 1 <= len(x["top_cpu_processes"]) <= 5
    assert x["top_rss_processes"][0] == top_rss
    assert f"(PID {top_rss['pid']})" in ev.summary and f"(PID {top_cpu['pid']})" in ev.summary
    assert "Top processes by CPU (over 0.5 s):" in ev.detail
    assert "Top processes by memory (RSS):" in ev.detail
    if any(t["pid"] == hog.pid for t in x["top_rss_processes"]):
        assert "bytearray(256" in ev.detail  # the command line (scrubbed, truncated) is shown

    nc = await nats.connect(nats_url)
    try:
        msg = await nc.jetstream().get_last_msg(
            topology.events_stream, topology.events_subject("system.pressure"))
    finally:
        await nc.close()
    assert MemoryEvent.model_validate_json(msg.data).key == ev.key

    crossings = [e for e in await reader.events()
                 if e.category == "system.pressure" and e.subcategory != "recovered"]
    assert len(crossings) == 1, [e.summary for e in crossings]

    w = health["watchers"]["pressure"]
    assert w["state"] == "running", w
    assert w["note"].startswith("watching: memory")
    if Path("/proc/pressure/memory").exists():
        assert "PSI (" in w["note"].split("; absent")[0], w
