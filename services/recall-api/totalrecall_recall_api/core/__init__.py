"""Pure recall logic: no network, no clock reads (time is passed in)."""
