"""The recall API's public entry points: all that code outside the service may import.

The evals use these names only, never the service's modules; everything else in the package may
change without notice. A unit test (`tests/unit/cli/test_service_entry_points.py`) fails when
cli/, eval/ or bench/ import anything else of a service.

- `without_speakers`: a question as the recall API embeds it, without the names of the people
  its conversation memories are between (`core/speakers.py`). The model-adaptation study
  (`eval/model_adapt.py`) tunes and scores the model on questions embedded this way.
"""

from __future__ import annotations

from .core.speakers import without_speakers

__all__ = ["without_speakers"]
