"""Pure watcher logic: change detection, scrubbing extras, rate limiting, the spool."""
