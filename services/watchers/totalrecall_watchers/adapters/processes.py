"""Child processes of the watchers: a short command run to its end, a long-running one ended."""

from __future__ import annotations

import asyncio
import contextlib


async def run_command(argv: list[str], timeout: float) -> tuple[int, str, str]:
    """Run a short command; (rc, stdout, stderr), rc -1 when it could not run or timed out."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL)
    except OSError as exc:
        return -1, "", str(exc)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        await end_process(proc)
        return -1, "", f"timed out after {timeout:g} s"
    finally:
        if proc.returncode is None:
            await end_process(proc)
    assert proc.returncode is not None
    return (proc.returncode, out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"))


async def end_process(proc: asyncio.subprocess.Process) -> None:
    """Terminate a child still running, then kill it if it does not go."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), 5)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
