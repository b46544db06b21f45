"""bench/peers/procmem: PSS of a process tree, read from a /proc laid out in a temp dir."""

from __future__ import annotations

from pathlib import Path

from bench.peers.procmem import parse_pss_kb, pss_mib, tree

ROLLUP = """55d0c0a00000-7ffd5b9f1000 ---p 00000000 00:00 0                          [rollup]
Rss:              204800 kB
Pss:              {pss} kB
Pss_Anon:          10000 kB
"""


def make_proc(root: Path, procs: dict[int, tuple[int, list[int]]]) -> Path:
    """procs: pid -> (pss kB, children); children are listed under two threads of the pid."""
    for pid, (pss, kids) in procs.items():
        (root / str(pid)).mkdir()
        (root / str(pid) / "smaps_rollup").write_text(ROLLUP.format(pss=pss))
        for tid, part in ((pid, kids[:1]), (pid + 1000, kids[1:])):
            task = root / str(pid) / "task" / str(tid)
            task.mkdir(parents=True)
            (task / "children").write_text(" ".join(map(str, part)) + (" " if part else ""))
    return root


def test_parse_pss() -> None:
    assert parse_pss_kb(ROLLUP.format(pss=1234)) == 1234
    assert parse_pss_kb("Rss: 5 kB\n") == 0


def test_tree_follows_children_of_every_thread(tmp_path: Path) -> None:
    proc = make_proc(tmp_path, {1: (1024, [2, 3]), 2: (2048, [4]), 3: (512, []),
                                4: (512, []), 9: (99999, [])})
    assert sorted(tree([1], proc)) == [1, 2, 3, 4]


def test_pss_sums_the_tree_and_skips_vanished(tmp_path: Path) -> None:
    proc = make_proc(tmp_path, {1: (1024, [2, 3]), 2: (2048, []), 3: (1024, [])})
    assert pss_mib([1], proc) == 4.0
    assert pss_mib([1, 77], proc) == 4.0      # 77 is gone: counts 0
    assert pss_mib([], proc) == 0.0
