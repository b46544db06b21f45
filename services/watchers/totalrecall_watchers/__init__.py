"""Total Recall watchers: observe the machine and publish scrubbed `MemoryEvent`s."""
