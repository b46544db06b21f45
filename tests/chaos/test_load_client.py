"""The row's probes: a Postgres backend that ends between listing and measuring is left out of
its service's sample, not the whole sample lost."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil

from .load_client import _per_service


def test_a_child_gone_mid_sample_is_skipped_not_the_service() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        def measure(proc: psutil.Process) -> float:
            if proc.pid == child.pid:
                raise psutil.NoSuchProcess(proc.pid)  # ended after the listing
            # This process counts; other children of the test run (servers of other tests)
            # weigh nothing here.
            return 7.0 if proc.pid == os.getpid() else 0.0

        assert _per_service({"postgres": os.getpid()}, measure) == {"postgres": 7.0}
        assert _per_service({"postgres": 2**22 + 7}, measure) == {"postgres": 0.0}  # gone
    finally:
        child.kill()
        child.wait()
