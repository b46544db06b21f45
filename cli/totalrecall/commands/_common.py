"""What the verbs share: the recall API client, `--json` output, API errors, progress bars."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import wraps
from typing import IO, TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # the client (httpx, pydantic) is imported only by verbs that talk to the API
    from totalrecall_client import TotalRecallClient

EXIT_OK, EXIT_FAILED, EXIT_UNREACHABLE = 0, 1, 2
T = TypeVar("T")


def api_url() -> str:
    """`$TOTALRECALL_API`, else the loopback port `totalrecall run` uses."""
    return os.environ.get("TOTALRECALL_API") or (
        "http://127.0.0.1:" + os.environ.get("TOTALRECALL_API_PORT", "8765"))


def post_json(path: str, body: dict[str, object], timeout: float = 600.0) -> int:
    """POST `body` to the recall API and print its JSON answer (for verbs that need no more)."""
    import httpx

    token = os.environ.get("TOTALRECALL_API_TOKEN")
    r = httpx.post(api_url() + path, json=body, timeout=timeout,
                   headers={"Authorization": f"Bearer {token}"} if token else {})
    print(json.dumps(r.json(), indent=2) if r.content else r.status_code)
    return 0 if r.is_success else 1


def default_namespace() -> str:
    return os.environ.get("TOTALRECALL_NAMESPACE") or "default"


def api_client(timeout: float = 60.0) -> TotalRecallClient:
    from totalrecall_client import TotalRecallClient

    return TotalRecallClient(api_url(), token=os.environ.get("TOTALRECALL_API_TOKEN") or None,
                             timeout=timeout)


def add_json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true",
                   help="print JSON (for scripts) instead of text for people")


def add_namespace_flag(p: argparse.ArgumentParser, what: str = "the namespace") -> None:
    p.add_argument("--namespace", "-N", default=None,
                   help=f"{what} (default: $TOTALRECALL_NAMESPACE or 'default')")


def emit(data: Any, human: str | Callable[[], str], as_json: bool,
         stream: IO[str] | None = None) -> None:
    """Print `data` as JSON, or the text for people."""
    out = stream or sys.stdout
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False, default=str), file=out)
    else:
        text = human() if callable(human) else human
        if text:
            print(text, file=out)


def fail(message: str, as_json: bool, code: int = EXIT_FAILED, **extra: Any) -> int:
    """Report an error (a JSON object on stdout with --json, a line on stderr otherwise)."""
    if as_json:
        print(json.dumps({"error": message, **extra}, ensure_ascii=False, default=str))
    else:
        print(f"totalrecall: {message}", file=sys.stderr)
    return code


def api_command(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn the client's errors into a clear message and an exit code: 2 when the API cannot be
    reached (with what to do), 1 when it refused or failed the request (with its reason)."""

    @wraps(fn)
    def run(args: argparse.Namespace) -> int:
        from totalrecall_client import TotalRecallConnectionError, TotalRecallError

        as_json = bool(getattr(args, "json", False))
        try:
            return fn(args)
        except TotalRecallConnectionError as exc:
            return fail(f"the recall API at {api_url()} is not reachable ({exc}); is the stack "
                        "running? Start it with `totalrecall run`, check it with "
                        "`totalrecall status`", as_json, EXIT_UNREACHABLE)
        except TotalRecallError as exc:
            return fail(str(getattr(exc, "reason", None) or exc), as_json,
                        status=getattr(exc, "status_code", None))
        except ValueError as exc:  # checked here before anything is sent (pydantic's reasons)
            return fail(_reason(exc), as_json)

    return run


def _reason(exc: ValueError) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                         for e in exc.errors())
    return str(exc)


# --- progress -------------------------------------------------------------------------------------
def progress_wanted(args: argparse.Namespace, stream: IO[str] | None = None) -> bool:
    """A bar only for people: on a terminal, without --json or --no-progress."""
    stream = stream or sys.stderr
    return (not getattr(args, "json", False) and not getattr(args, "no_progress", False)
            and bool(getattr(stream, "isatty", lambda: False)()))


def add_progress_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (there is none anyway when stderr is not a terminal)")


class _NoBar:
    """What a tqdm bar offers, doing nothing (not a terminal)."""

    def __init__(self, total: int | None = None) -> None:
        self.total = total
        self.n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(enabled: bool, total: int | None, desc: str, unit: str = "mem") -> Any:
    """A tqdm bar on stderr, or a stand-in that draws nothing."""
    if not enabled:
        return _NoBar(total)
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
                unit_scale=True)


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
