"""The machine line every benchmark prints with its figures."""

from __future__ import annotations

from bench.machine import describe

ZEN1 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 1
model name\t: AMD EPYC
cpu MHz\t\t: 1996.249
flags\t\t: fpu sse sse2 avx fma f16c avx2 bmi2

processor\t: 1
model name\t: something else
"""

ZEN4 = ZEN1.replace("cpu family\t: 23", "cpu family\t: 25").replace(
    "avx2 bmi2", "avx2 bmi2 avx512f avx512_vnni")

ARM = """processor\t: 0
Features\t: fp asimd evtstrm aes crc32
CPU implementer\t: 0x41
"""


def test_an_avx2_machine_says_it_has_no_avx512() -> None:
    assert describe(ZEN1, cpus=2) == ("machine: AMD EPYC (family 23 model 1), 2 cpus at 1996 MHz, "
                                      "avx2 fma avx (no avx512)")


def test_an_avx512_machine_names_its_widest_extensions_first() -> None:
    line = describe(ZEN4, cpus=2)
    assert "family 25" in line
    assert line.endswith("avx512_vnni avx512f avx2 fma avx")


def test_an_arm_machine_and_an_unreadable_cpuinfo() -> None:
    assert describe(ARM, cpus=4) == "machine: unknown CPU, 4 cpus, asimd"
    assert describe("", cpus=1) == "machine: unknown CPU, 1 cpus"
