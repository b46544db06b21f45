"""Total Recall embedder: MemoryEvent → EmbeddedEvent (llama.cpp GGUF embeddings)."""
