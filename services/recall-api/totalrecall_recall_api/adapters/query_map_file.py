"""The question map's file (`recall/query_map.py`): an `.npz` written by
`python -m eval.query_adapter build`, with

- `matrix`: float32, d × d, applied to a question's vector;
- `model`: the start of the fingerprints of the models it was learned for
  (`all-MiniLM-L6-v2`: the f16 and q8_0 builds alike);
- `about`: JSON, how it was made (data, settings, figures), for a reader.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..recall.query_map import QueryMap

log = logging.getLogger("totalrecall.recall")

def load_query_map(path: Path) -> QueryMap | None:
    """The map in `path`, or None (no file: questions are searched as embedded). A file that is
    there but unreadable is an error: a deployment that names a map wants it."""
    if not path.is_file():
        log.info("no question map at %s: questions are searched as embedded", path)
        return None
    with np.load(path, allow_pickle=False) as z:
        matrix = np.ascontiguousarray(z["matrix"], dtype=np.float32)
        model = str(z["model"])
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or not np.isfinite(matrix).all():
        raise ValueError(f"{path}: the question map must be a finite square matrix, "
                         f"not {matrix.shape}")
    log.info("question map %s for %s (%d dimensions)", path.name, model, matrix.shape[0])
    return QueryMap(matrix=matrix, model=model)
