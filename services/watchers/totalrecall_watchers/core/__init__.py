"""Pure watcher logic: change detection, thresholds and hysteresis, parsing what the adapters
read, rendering events, scrubbing extras, rate limiting. Nothing here reads the host: the
adapters (`adapters/`) do, and `container.py` hands them in (tests/unit/watchers/
test_watchers_shape.py checks it)."""
