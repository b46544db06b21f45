"""The last local-free link of the fallback chain: an OpenAI-compatible embeddings endpoint
(OpenAI, llama.cpp's `llama-server --embeddings`, vLLM, Ollama's /v1, …)."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import httpx

from ..core.backend import MAX_TEXT_CHARS, EmbedBackend, ModelUnavailable
from ..core.engine import EngineConfig

log = logging.getLogger("totalrecall.embedder")


def embeddings_url(base: str) -> str:
    """`http://h:8080` → `http://h:8080/v1/embeddings`; `…/v1` → `…/v1/embeddings`; a URL that
    already ends with `/embeddings` is used as is."""
    base = base.rstrip("/")
    if base.endswith("/embeddings"):
        return base
    if base.endswith("/v1"):
        return base + "/embeddings"
    return base + "/v1/embeddings"


def _normalise(vec: Sequence[float]) -> list[float]:
    n = math.sqrt(sum(float(x) * float(x) for x in vec))
    if n == 0.0:
        raise ValueError("the endpoint returned a zero vector")
    return [round(float(x) / n, 7) for x in vec]


class RemoteBackend:
    """Synchronous like the llama backend (the engine calls it in a worker thread). The probe in
    the constructor learns the dimension and fails fast (ModelUnavailable) when the endpoint is
    unreachable or answers nonsense. Vectors are L2-normalised here (OpenAI's already are; not
    every server's). The fingerprint is `remote:<model>` (the indexer never mixes it with the
    local model's vectors)."""

    device = "remote"

    def __init__(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
                 timeout: float = 30.0, chunk: int = 64,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url = embeddings_url(base_url)
        self.model = model
        self.model_name = model or self.url
        self.chunk = max(1, chunk)
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(timeout=timeout, headers=headers, transport=transport)
        self.fingerprint = f"remote:{model or 'default'}"
        try:  # a short probe: a dead endpoint must not stall the consumer for long
            probe = self._post(["ping"], timeout=min(timeout, 5.0))
        except Exception as exc:
            self._client.close()
            raise ModelUnavailable(f"fallback endpoint {self.url} unusable: {exc}") from exc
        self.dim = len(probe[0])

    def _post(self, texts: list[str], timeout: float | None = None) -> list[list[float]]:
        body: dict[str, Any] = {"input": texts, "encoding_format": "float"}
        if self.model:
            body["model"] = self.model
        r = (self._client.post(self.url, json=body) if timeout is None
             else self._client.post(self.url, json=body, timeout=timeout))
        r.raise_for_status()
        data = r.json()["data"]
        if len(data) != len(texts):
            raise ValueError(f"asked for {len(texts)} embeddings, got {len(data)}")
        data = sorted(data, key=lambda d: int(d.get("index", 0)))
        return [_normalise(d["embedding"]) for d in data]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        cut = [t[:MAX_TEXT_CHARS] for t in texts]
        for i in range(0, len(cut), self.chunk):
            vecs = self._post(cut[i:i + self.chunk])
            if any(len(v) != self.dim for v in vecs):
                raise ValueError("the endpoint changed its dimension")
            out.extend(vecs)
        return out

    def close(self) -> None:
        self._client.close()


def default_remote_factory(c: EngineConfig) -> EmbedBackend:
    """The fallback chain's remote link as the container wires it into the engine."""
    assert c.fallback_url is not None
    return RemoteBackend(c.fallback_url, model=c.fallback_model, api_key=c.fallback_api_key,
                         timeout=c.fallback_timeout_s, chunk=c.rpc_batch_chunk)
