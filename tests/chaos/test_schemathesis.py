"""Row: schemathesis over the recall API's `/openapi.json` against the live stack: every
operation, valid and invalid requests (positive and negative generation), with the bearer token.
Holds when no response is 5xx and every 4xx names its reason (a non-empty `detail`)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis.generation.modes import GenerationMode

from tests.chaos.report import ROWS, record
from tests.chaos.stack_inputs import Stack, chaos_stack

ROW = next(r for r in ROWS if r.startswith("schemathesis over"))


def _reason(body: bytes) -> str:
    """The reason a 4xx gives: its JSON `detail` (a string, or FastAPI's list of errors)."""
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        return ""
    if isinstance(detail, list):
        return "; ".join(str(d.get("msg", "")) for d in detail if isinstance(d, dict)).strip()
    return str(detail or "").strip()


def _calls(stack: Stack, op: Any, mode: GenerationMode, examples: int, seen: Counter[int],
           failures: list[str]) -> Any:
    """`examples` generated requests to one operation, each response checked."""
    label = f"{op.method.upper()} {op.path}"

    @hypothesis.settings(max_examples=examples, deadline=None, database=None,
                         phases=[Phase.generate], derandomize=True,
                         suppress_health_check=list(HealthCheck))
    @hypothesis.given(case=op.as_strategy(mode))
    def call(case: Any) -> None:
        response = case.call(base_url=stack.url, headers=stack.headers, timeout=60)
        code = response.status_code
        seen[code] += 1
        if code >= 500 or (400 <= code < 500 and not _reason(response.content)):
            failures.append(f"{label} -> {code} {response.content[:300]!r} for "
                            f"{case.as_curl_command()[:600]}")
    return call


def _fuzz(stack: Stack, examples: int) -> tuple[dict[str, Any], list[str]]:
    schema = schemathesis.openapi.from_url(f"{stack.url}/openapi.json")
    statuses: dict[str, Counter[int]] = {}
    failures: list[str] = []
    for result in schema.get_all_operations():
        op = result.ok()
        seen = statuses.setdefault(f"{op.method.upper()} {op.path}", Counter())
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            # An operation without parameters or body has no invalid request to generate.
            with contextlib.suppress(hypothesis.errors.Unsatisfiable):
                _calls(stack, op, mode, examples, seen, failures)()
    summary = {label: dict(sorted(c.items())) for label, c in statuses.items()}
    return summary, failures


def _check(tmp_path: Path, examples: int) -> tuple[dict[str, object], list[str]]:
    with chaos_stack(tmp_path / "home", token=uuid.uuid4().hex) as stack:
        # Something to find, so recall/timeline/source/forget run their real paths.
        stack.post("/memory/ingest", [{"summary": f"nginx.service failed, port {p} in use",
                                       "category": "system.service"} for p in range(20)])
        stack.wait_recallable("nginx failed port in use", "nginx")
        statuses, failures = _fuzz(stack, examples)
        restarts = stack.supervisor_restarts()
    total = Counter[int]()
    for c in statuses.values():
        total.update(c)
    figures: dict[str, object] = {
        "examples_per_operation_and_mode": examples, "operations": len(statuses),
        "requests": sum(total.values()),
        "responses_5xx": sum(n for code, n in total.items() if code >= 500),
        "responses_4xx": sum(n for code, n in total.items() if 400 <= code < 500),
        "responses_4xx_without_reason": sum(1 for f in failures if " -> 4" in f),
        "by_status": dict(sorted(total.items())),
        "service_restarts": restarts, "failures_first": failures[:10]}
    return figures, failures


@pytest.mark.chaos
@pytest.mark.timeout(1800)
def test_schemathesis(tmp_path: Path) -> None:
    figures, failures = _check(tmp_path, examples=100)
    holds = not failures and figures["service_restarts"] == 0
    record(ROW, holds, figures, "; ".join(failures[:3])[:800])
    assert holds, failures[:10]


@pytest.mark.fast
def test_schemathesis_fast(tmp_path: Path) -> None:
    figures, failures = _check(tmp_path, examples=3)
    record(ROW, not failures and figures["service_restarts"] == 0, figures)
    assert not failures and figures["service_restarts"] == 0, "\n".join(failures[:20])
