"""The embedder's I/O: the on-disk stores (embedding cache, backfill journal), the remote
embeddings API, the query RPC's own NATS connection, and what llama.cpp says about its build."""
