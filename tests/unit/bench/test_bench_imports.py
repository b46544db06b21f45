"""Every bench module imports as `python -m bench.<name>` runs it: from the repository root,
without pytest's import path (which also puts `tests/` on `sys.path`, hiding imports that only
work under pytest: `python -m bench.cpu_per_op` once failed that way)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

#: The peers' adapters run in each peer's own venv with a state directory as argument.
CHECK = """
import importlib, pkgutil, bench
failed = []
for m in pkgutil.walk_packages(bench.__path__, "bench."):
    if m.name.endswith("_adapter"):
        continue
    try:
        importlib.import_module(m.name)
    except Exception as exc:
        failed.append(f"{m.name}: {exc!r}")
print("\\n".join(failed))
"""


def test_every_bench_module_imports_outside_pytest() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip() == "", done.stdout
