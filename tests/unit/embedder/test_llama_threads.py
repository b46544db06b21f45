"""Every place that builds a llama.cpp model sets `n_threads_batch`: its default is every core,
with OpenMP threads that spin while they wait, so two such models side by side (an embedder and
an eval, two embedders) slow each other down many times over (3 texts/s each against 71/s for
one alone, on 2 cores)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
WHERE = ("services", "cli", "eval", "bench", "libs", "integrations")


def _llama_calls(tree: ast.AST) -> list[ast.Call]:
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name == "Llama":
                calls.append(node)
    return calls


def test_every_llama_sets_its_batch_threads() -> None:
    found, missing = 0, []
    for top in WHERE:
        for path in sorted((REPO / top).rglob("*.py")):
            if ".venv" in path.parts or "node_modules" in path.parts:
                continue
            text = path.read_text(errors="replace")
            if "Llama" not in text:
                continue
            tree = ast.parse(text)
            for call in _llama_calls(tree):
                found += 1
                if not any(k.arg == "n_threads_batch" for k in call.keywords):
                    missing.append(f"{path.relative_to(REPO)}:{call.lineno}")
            # Code run in a child process, written as a string (the doctor's load check).
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and "Llama(" in node.value:
                    found += 1
                    if "n_threads_batch" not in node.value:
                        missing.append(f"{path.relative_to(REPO)}:{node.lineno} (in a string)")
    assert found >= 4, "the scan found no llama.cpp models: has the code moved?"
    assert not missing, f"Llama built without n_threads_batch at {missing}"
