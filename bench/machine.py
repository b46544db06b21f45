"""What machine a benchmark ran on, in one line printed with its figures.

Latency here is compute on one or two cores: the same code measured a short query embedding at
3.4 ms on an AVX-512 EPYC and 17.5 ms on a Zen 1 EPYC at 2 GHz. Recorded figures mean little
without the CPU they came from.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Vector extensions that decide llama.cpp's and numpy's speed, widest first.
_SIMD = ("avx512_vnni", "avx512f", "avx2", "fma", "avx", "neon", "asimd")


def _cpuinfo(text: str) -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo."""
    info: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if info:
                break
            continue
        key, _, value = line.partition(":")
        info.setdefault(key.strip().lower(), value.strip())
    return info


def describe(cpuinfo: str | None = None, cpus: int | None = None) -> str:
    """e.g. `machine: AMD EPYC (family 23 model 1), 2 cpus at 1996 MHz, avx2 fma avx (no avx512)`."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    info = _cpuinfo(cpuinfo)
    name = info.get("model name") or info.get("hardware") or "unknown CPU"
    if "cpu family" in info and "model" in info:
        name += f" (family {info['cpu family']} model {info['model']})"
    n = cpus if cpus is not None else os.cpu_count()
    mhz = info.get("cpu mhz")
    flags = set((info.get("flags") or info.get("features") or "").split())
    simd = [f for f in _SIMD if f in flags]
    line = f"machine: {name}, {n} cpus" + (f" at {float(mhz):.0f} MHz" if mhz else "")
    if simd:
        line += ", " + " ".join(simd)
        if "avx2" in flags and "avx512f" not in flags:
            line += " (no avx512)"
    return line
