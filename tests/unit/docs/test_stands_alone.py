"""The repository stands alone: a person who clones it sees no issue tracker's numbers and no
paths outside it (the design and the benchmark data's documentation are copied in or named by
what they are)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
#: Results written by runs (they record what ran, machine paths included).
_SKIP = re.compile(r"^(tests/chaos/results/|bench/results/.*\.json$|eval/results/.*\.json$)|"
                   r"package-lock\.json$")
_OUTSIDE = re.compile(r"\.\./shared\b|/work/shared\b|\bshared/(?:eval|docs)/")
_ISSUE = re.compile(r"\bissues? #?\d+\b", re.IGNORECASE)


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.split()
    files = []
    for name in out:
        path = REPO / name
        if _SKIP.search(name) or not path.is_file():
            continue
        try:
            path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        files.append(path)
    return files


def test_no_path_outside_the_repository_and_no_issue_numbers() -> None:
    files = _tracked_text_files()
    assert len(files) > 100  # the scan sees the repository
    found = []
    for path in files:
        if path == Path(__file__).resolve():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _OUTSIDE.search(line) or _ISSUE.search(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:120]}")
    assert found == [], "\n".join(found)
