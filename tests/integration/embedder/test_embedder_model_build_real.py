"""The real model build: torch-free conversion of the packaged weights, reproducible."""

from __future__ import annotations

import json
from pathlib import Path

from totalrecall import model_build as mb
from totalrecall.commands import model


def test_f16_build_is_byte_identical_to_llama_cpp_and_idempotent(tr_home: Path,
                                                                 model_path: Path) -> None:
    # Reuse the unpacked sdist of the real installation (downloaded only when it is absent).
    cache = model_path.parent.parent / "cache"
    out = tr_home / "models" / "all-MiniLM-L6-v2.f16.gguf"
    assert model.build(["--outtype", "f16", "--converter", "numpy", "--cache-dir", str(cache),
                    "--out", str(out)]) == 0
    info = json.loads((out.parent / (out.name + ".json")).read_text())
    assert info["sha256"] == mb.REFERENCE_SHA256["f16"]  # byte-identical to llama.cpp's converter
    assert info["reference_sha256_match"] is True and info["converter"] == "numpy"
    assert info["verify"]["dim"] == 384
    assert 0.3 < info["verify"]["cos_related"] < 0.55 and info["verify"]["cos_unrelated"] < 0.2
    assert info["fingerprint"] == "all-MiniLM-L6-v2.f16:" + mb.REFERENCE_SHA256["f16"][:12]
    mtime = out.stat().st_mtime_ns
    assert model.build(["--outtype", "f16", "--cache-dir", str(cache), "--out", str(out)]) == 0  # no-op
    assert out.stat().st_mtime_ns == mtime
    assert not list(out.parent.glob(".*tmp*"))


def test_default_q8_0_build_verifies_and_is_reproducible(tr_home: Path, model_path: Path) -> None:
    cache = model_path.parent.parent / "cache"
    out = mb.default_out(home=tr_home)
    assert model.build(["--cache-dir", str(cache), "--out", str(out)]) == 0
    assert out.name == "all-MiniLM-L6-v2.q8_0.gguf"
    info = json.loads((out.parent / (out.name + ".json")).read_text())
    assert info["outtype"] == "q8_0" and info["verify"]["dim"] == 384
    assert 0.3 < info["verify"]["cos_related"] < 0.55 and info["verify"]["cos_unrelated"] < 0.2
    assert info["fingerprint"] == "all-MiniLM-L6-v2.q8_0:" + info["sha256"][:12]
    if model_path.name == out.name:  # the installation's default model: the very same bytes
        installed = (model_path.parent / (model_path.name + ".sha256")).read_text().split()[0]
        assert info["sha256"] == installed
