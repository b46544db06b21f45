"""`totalrecall export` / `totalrecall import-jsonl`: every memory of a namespace to a JSON-lines
file and back, losslessly (export → import → export gives the same lines).

`export` streams `GET /memory/export` (one `ExportedMemory` per line, key order) into the file
(written aside and renamed when complete: a cut-off export never looks like a whole one) or to
standard output. `import-jsonl` reads such a file (`importers.jsonl`) and ingests it in batches;
ids are kept, so importing twice adds nothing; `--namespace` moves everything into one namespace.
Both show a progress bar on a terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    add_json_flag,
    add_progress_flag,
    api_client,
    api_command,
    default_namespace,
    emit,
    fail,
    progress_bar,
    progress_wanted,
)

#: Below the API's defaults (1,000 events and 2 MiB per request), with room for JSON overhead.
BATCH_EVENTS = 500
BATCH_BYTES = 1_500_000


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="write every memory of a namespace as JSON lines",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", default="-", help="file to write (default: standard output)")
    p.add_argument("--namespace", "-N", default=None,
                   help="the namespace to export (default: $TOTALRECALL_NAMESPACE or 'default')")
    add_progress_flag(p)
    add_json_flag(p)
    p.set_defaults(func=export)

    p = sub.add_parser("import-jsonl", help="ingest a file `totalrecall export` wrote",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="the JSON-lines file ('-': standard input)")
    p.add_argument("--namespace", "-N", default=None,
                   help="put every memory into this namespace (default: the one each line names)")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip lines that are not memories (default: stop at the first)")
    p.add_argument("--dry-run", action="store_true", help="read and check, send nothing")
    add_progress_flag(p)
    add_json_flag(p)
    p.set_defaults(func=import_jsonl)


# --- export --------------------------------------------------------------------------------------
@api_command
def export(args: argparse.Namespace) -> int:
    namespace = args.namespace or default_namespace()
    to_stdout = args.output == "-"
    bar_on = progress_wanted(args)
    with api_client(timeout=120.0) as client:
        total = None
        if bar_on:  # the bar's total: a count taken just before (writes may change it)
            total = int(client.stats(namespace=namespace).get("total") or 0)
        target = Path(args.output)
        tmp = target.with_name(f".{target.name}.partial") if not to_stdout else None
        out = sys.stdout if tmp is None else open(tmp, "w", encoding="utf-8")  # noqa: SIM115
        n = size = 0
        try:
            with progress_bar(bar_on, total, f"export {namespace}") as bar:
                for line in client.export(namespace):
                    out.write(line + "\n")
                    n += 1
                    size += len(line) + 1
                    bar.update(1)
            out.flush()
            if tmp is not None:
                os.fsync(out.fileno())
                out.close()
                os.replace(tmp, target)
        finally:
            if tmp is not None and not out.closed:
                out.close()
                tmp.unlink(missing_ok=True)
    summary = {"namespace": namespace, "exported": n, "bytes": size,
               "file": None if to_stdout else str(target)}
    where = "standard output" if to_stdout else str(target)
    # With the memories on standard output, the summary goes to standard error.
    emit(summary, f"Exported {n} memories of namespace {namespace} to {where}.", args.json,
         stream=sys.stderr if to_stdout else None)
    return EXIT_OK


# --- import --------------------------------------------------------------------------------------
def _size(event: dict[str, Any]) -> int:
    return len(json.dumps(event, ensure_ascii=False).encode())


@api_command
def import_jsonl(args: argparse.Namespace) -> int:
    from ..importers.jsonl import BadLine, read

    bad: list[str] = []
    namespaces: Counter[str] = Counter()
    sent = duplicates = read_n = 0
    file_size = None
    if args.file != "-":
        try:
            file_size = Path(args.file).stat().st_size
        except OSError as exc:
            return fail(f"cannot read {args.file}: {exc.strerror}", args.json)
    bar_on = progress_wanted(args)
    with api_client(timeout=120.0) as client, \
            progress_bar(bar_on, file_size, f"import {Path(args.file).name}", unit="B") as bar:
        batch: list[dict[str, Any]] = []
        batch_bytes = 0

        def flush() -> None:
            nonlocal sent, duplicates, batch, batch_bytes
            if batch and not args.dry_run:
                res = client.ingest(batch)
                sent += res.accepted
                duplicates += res.duplicates
            batch, batch_bytes = [], 0
            bar.set_postfix_str(f"{sent} sent", refresh=False)

        try:
            for event in read(args.file, on_bytes=bar.update,
                              on_bad_line=(lambda b: bad.append(str(b))) if args.skip_bad
                              else None):
                if args.namespace:
                    event["namespace"] = args.namespace
                read_n += 1
                namespaces[event["namespace"]] += 1
                size = _size(event)
                if batch and (len(batch) >= BATCH_EVENTS or batch_bytes + size > BATCH_BYTES):
                    flush()
                batch.append(event)
                batch_bytes += size
            flush()
        except BadLine as exc:
            flush()  # what came before the bad line is in; a re-run after the fix adds nothing
            return fail(f"{exc} (nothing after it was imported; --skip-bad skips such lines)",
                        args.json, EXIT_FAILED, read=read_n, sent=sent)
        except OSError as exc:
            return fail(f"cannot read {args.file}: {exc}", args.json)
    summary = {"file": args.file, "read": read_n, "sent": sent, "duplicates": duplicates,
               "skipped": bad, "namespaces": dict(namespaces), "dry_run": args.dry_run}

    def human() -> str:
        verb = "Checked" if args.dry_run else "Imported"
        lines = [f"{verb} {read_n} memories from {args.file}"
                 + (f" ({duplicates} already there)" if duplicates else "")
                 + ": " + ", ".join(f"{ns} {k}" for ns, k in namespaces.most_common())]
        lines += [f"skipped {b}" for b in bad]
        return "\n".join(lines)

    emit(summary, human, args.json)
    return EXIT_OK
