"""`docs/design.md` is the design inside the repository: every reference to one of its sections
("docs/design.md §14", in code, comments and docs) names a section it has, and nothing points at
the design file outside the repository any more."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "design.md"
#: `docs/design.md` §12, docs/design.md §13 (a backtick or a comma between them allowed)
_REFERENCE = re.compile(r"docs/design\.md`?,? §(\d+)")
_SECTION = re.compile(r"^## §(\d+)\. ", re.MULTILINE)
#: the design's own file, outside this repository
_OUTSIDE = re.compile(r"docs/design/[\w-]+\.md")
_TEXT = (".py", ".md", ".nix", ".ts", ".yml", ".yaml", ".toml", ".sh")


def _tracked_texts() -> dict[str, str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    out = {}
    for name in files:
        path = ROOT / name
        if name.endswith(_TEXT) and path.is_file():
            out[name] = path.read_text(encoding="utf-8", errors="replace")
    return out


def test_every_reference_names_a_section_the_design_page_has() -> None:
    sections = {int(n) for n in _SECTION.findall(DOC.read_text(encoding="utf-8"))}
    assert sections == set(range(19)), sorted(sections)  # §0 … §18, the design's numbering
    references = {(name, int(n)) for name, text in _tracked_texts().items()
                  for n in _REFERENCE.findall(text)}
    assert {n for _, n in references} >= {12, 13, 14}  # the ledger, patterns, NixOS references
    missing = sorted((name, n) for name, n in references if n not in sections)
    assert not missing, f"references to sections docs/design.md does not have: {missing}"


def test_nothing_points_at_the_design_file_outside_the_repository() -> None:
    outside = sorted(name for name, text in _tracked_texts().items() if _OUTSIDE.search(text))
    assert not outside, f"reference the design outside the repository: {outside}"
