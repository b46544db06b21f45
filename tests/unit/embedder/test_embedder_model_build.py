"""`totalrecall model build` pieces that need no model, network or sdist."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from totalrecall import model_build as mb


def test_default_out_is_the_store_every_home_finds(tr_home: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A build goes to the shared store (not the current home, which a new home would miss),
    unless the home holds the model already; `home=` builds into that home."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    name = "all-MiniLM-L6-v2.q8_0.gguf"
    assert mb.default_out() == tmp_path / "cache" / "totalrecall" / "models" / name
    assert mb.default_out("f16").name == "all-MiniLM-L6-v2.f16.gguf"
    assert mb.default_out(home=tr_home) == tr_home / "models" / name
    (tr_home / "models").mkdir()
    (tr_home / "models" / name).write_bytes(b"gguf")
    assert mb.default_out() == tr_home / "models" / name


def test_the_output_name_states_the_weights_type() -> None:
    assert mb.outtype_of(Path("/m/all-MiniLM-L6-v2.f16.gguf")) == "f16"
    assert mb.outtype_of(Path("/m/x.q8_0.gguf")) == "q8_0"
    assert mb.outtype_of(Path("/m/model.gguf")) is None and mb.outtype_of(None) is None


def test_records_make_a_rebuild_a_no_op(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "m" / "tiny.f16.gguf"
    out.parent.mkdir()
    out.write_bytes(b"not really a model")
    assert mb.is_valid(out) == (False, "no fingerprint record")
    info = mb.write_records(out, converter="numpy", outtype="f16", model_dir=None,
                            check={"dim": 384})
    assert info["fingerprint"] == f"tiny.f16:{info['sha256'][:12]}"
    assert (tmp_path / "m" / "tiny.f16.gguf.sha256").read_text().split() == [
        info["sha256"], "tiny.f16.gguf"]
    assert json.loads((tmp_path / "m" / "tiny.f16.gguf.json").read_text())["size"] == 18
    assert mb.is_valid(out) == (True, "ok")

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("must not convert")

    monkeypatch.setattr(mb, "find_source_model", boom)
    assert mb.build(out, home=tmp_path)["fingerprint"] == info["fingerprint"]
    assert "nothing to do" in capsys.readouterr().out
    out.write_bytes(b"tampered!!!!!!!!!!")  # same size, other content
    assert mb.is_valid(out) == (False, "sha256 differs from the record")


def test_safetensors_reader(tmp_path: Path) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1.5, -2.0], dtype=np.float16)
    header = {"b.bias": {"dtype": "F16", "shape": [2], "data_offsets": [24, 28]},
              "a.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
              "__metadata__": {"format": "pt"}}
    raw = json.dumps(header).encode()
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + a.tobytes() + b.tobytes())
    got = mb.read_safetensors(path)
    assert list(got) == ["a.weight", "b.bias"]
    np.testing.assert_array_equal(got["a.weight"], a)
    np.testing.assert_array_equal(got["b.bias"], b)


@pytest.mark.parametrize(("returncode", "says"), [
    (-4, "SIGILL, an illegal instruction"),
    (-9, "killed by SIGKILL"),
    (1, "(exit 1): boom"),
])
def test_a_failed_verification_says_how_the_loader_died(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, returncode: int, says: str) -> None:
    import subprocess

    def died(*_a: object, **_k: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], returncode, stdout="", stderr="boom\n")

    monkeypatch.setattr(mb.subprocess, "run", died)
    with pytest.raises(mb.BuildError) as err:
        mb.verify(tmp_path / "m.gguf")
    assert says in str(err.value)
    assert "boom" in str(err.value)
