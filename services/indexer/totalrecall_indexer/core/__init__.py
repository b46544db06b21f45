"""The indexer's logic: the rooms composed by `indexer.Indexer`, and pure helpers (the daily
log's format, MEMORY.md parsing, search filters and fusion). I/O on the stores lives in
`adapters/`."""
