"""The indexer's I/O: its three stores (the Markdown daily log on disk, the ground truth; the
Postgres mirror; the Zvec tiers, with the guard around their HNSW builds), its NATS clients
(the embedder's batch RPC, the partition leases) and the runtime gauges they feed."""
