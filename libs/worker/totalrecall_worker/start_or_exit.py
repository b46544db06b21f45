"""A worker's start that either completes or ends the process.

FastStream's ASGI app answers HTTP as soon as the `on_startup` hooks are done, and runs the
`after_startup` hooks (the consumers, the responders, the loops: `Lifecycle.serve`) in a task
behind it. When such a hook raises, uvicorn logs the traceback once and goes on serving: the
process lives on with `/health` answering 503 "starting" for good, a container no supervisor
restarts (it is running) and whose only clue scrolled out of the log long ago. A compose smoke
run once waited ten minutes on exactly that.

`start_or_exit` wraps such a hook: a failure ends the process with exit 70 (EX_SOFTWARE) so that
its supervisor (compose `restart:`, systemd `Restart=on-failure`) starts it again; that is
safe because the workers are crash-safe (what was not acked is redelivered). A start that is
merely slow says every `report_every_s` where it waits, with the stack of the waiting task.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("totalrecall.worker")

#: The exit status of a process that ended itself so that its supervisor restarts it.
EX_SOFTWARE = 70


def exit_process(status: int = EX_SOFTWARE) -> None:
    """End the process at once (no shutdown hooks: they would wait on what failed)."""
    logging.shutdown()
    os._exit(status)


def start_or_exit(serve: Callable[[], Awaitable[object]], *, service: str,
                  report_every_s: float = 60.0,
                  on_failure: Callable[[int], None] | None = exit_process,
                  ) -> Callable[[], Awaitable[None]]:
    """`serve`, as an `after_startup` hook that ends the process when it fails (`on_failure`;
    None: the failure is only logged and raised, for an app run inside a test's process)."""
    async def hook() -> None:
        started = time.monotonic()
        task = asyncio.ensure_future(serve())
        while True:
            try:
                done, _ = await asyncio.wait({task}, timeout=report_every_s)
            except asyncio.CancelledError:  # stopped while starting: so is the start
                task.cancel()
                raise
            if done:
                break
            log.warning("the %s is still starting after %.0f s; it waits at:\n%s", service,
                        time.monotonic() - started, _where(task))
        try:
            await task  # done: its result, or its failure or cancellation (a stop) raised again
        except Exception as exc:
            log.critical("the %s could not start%s", service,
                         "" if on_failure is None else
                         f": exiting (status {EX_SOFTWARE}) so that its supervisor starts it "
                         "again; nothing is lost (what was not acked is redelivered)",
                         exc_info=exc)
            if on_failure is not None:
                on_failure(EX_SOFTWARE)
            raise  # reached only when nothing ended the process (a test's own process)
    return hook


def _where(task: asyncio.Future[object]) -> str:
    """The await chain of the task's coroutine, outermost first (a suspended task's own stack
    holds only its outermost frame)."""
    lines: list[str] = []
    coro: object = task.get_coro() if isinstance(task, asyncio.Task) else None
    while coro is not None and len(lines) < 20:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            code = frame.f_code
            lines.append(f"  {code.co_filename}:{frame.f_lineno} in {code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return "\n".join(lines) or "  (no frame)"
