"""Loading the embedder's model: device selection and the fallback chain.

Fallback chain: GPU (every layer offloaded, when llama.cpp can) → CPU → an OpenAI-compatible
endpoint (`fallback_url`, optional) → none (events flow on with vector=None; the backfill embeds
them once a model is back). While not on the local model, the engine looks for it again every
`model_retry_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .backend import EmbedBackend, ModelUnavailable
from .device import ActiveDevice, DeviceChoice, choose_device
from .parallel import ParallelBackend
from .priority import usable_cpus

if TYPE_CHECKING:
    from .engine import EngineConfig

log = logging.getLogger("totalrecall.embedder")

#: (model_path, *, n_threads, n_ctx, n_batch, n_gpu_layers, flash_attn, fingerprint) → backend
LocalFactory = Callable[..., EmbedBackend]
RemoteFactory = Callable[["EngineConfig"], EmbedBackend]


def no_remote(c: EngineConfig) -> EmbedBackend:
    """The remote factory of an engine given none: the real one does HTTP
    (`adapters/remote.py`), and the container passes it."""
    raise ModelUnavailable("no remote embedder wired in (the container passes adapters/remote.py)")


def no_gpu() -> bool:
    """The GPU probe of an engine given none: asking llama.cpp is the container's part
    (`adapters/llama_probe.py`), so an engine built alone runs on the CPU."""
    return False


def device_of(backend: EmbedBackend | None) -> ActiveDevice:
    if backend is None:
        return "none"
    dev = getattr(backend, "device", "cpu")
    if dev == "gpu":
        return "gpu"
    return "remote" if dev == "remote" else "cpu"


class ModelLoading:
    """The loading half of `Engine` (which sets these in its constructor)."""

    config: EngineConfig
    ingest: EmbedBackend | None
    query: EmbedBackend | None
    device: ActiveDevice
    device_reason: str
    error: str | None
    gpu_wanted: bool
    changed: asyncio.Event
    _injected: bool
    _local_factory: LocalFactory
    _remote_factory: RemoteFactory
    _gpu_probe: Callable[[], bool]
    _last_attempt: float
    _load_lock: asyncio.Lock

    @property
    def available(self) -> bool:
        """Vectors can be made (local model or the fallback endpoint)."""
        return self.ingest is not None

    @property
    def local(self) -> bool:
        return self.ingest is not None and self.device in ("gpu", "cpu")

    @property
    def fingerprint(self) -> str | None:
        return self.ingest.fingerprint if self.ingest is not None else None

    @property
    def dim(self) -> int | None:
        return self.ingest.dim if self.ingest is not None else None

    def _local(self, path: Path, choice: DeviceChoice, *, n_threads: int,
               n_batch: int | None = None, fingerprint: str | None = None) -> EmbedBackend:
        c = self.config
        try:
            return self._local_factory(
                path, n_threads=n_threads, n_ctx=c.n_ctx, n_batch=n_batch or c.n_ctx,
                n_gpu_layers=choice.n_gpu_layers, flash_attn=c.flash_attn,
                fingerprint=fingerprint)
        except ModelUnavailable:
            raise
        except Exception as exc:
            raise ModelUnavailable(f"cannot load {path}: {exc}") from exc

    def ingest_contexts(self, choice: DeviceChoice) -> int:
        """How many ingest contexts: one on the GPU, or with `n_threads` 0 (one context on
        every core); else `ingest_workers`, 0 meaning as many as the cores allow at
        `n_threads` each."""
        c = self.config
        if choice.device == "gpu" or c.n_threads == 0:
            return 1
        return c.ingest_workers or max(1, usable_cpus() // c.n_threads)

    def _ingest(self, choice: DeviceChoice) -> EmbedBackend:
        c = self.config
        if choice.device == "gpu":
            return self._local(c.model_path, choice, n_threads=c.n_threads or usable_cpus(),
                               n_batch=c.gpu_n_batch)
        first = self._local(c.model_path, choice, n_threads=c.n_threads or usable_cpus())
        contexts = [first]
        try:
            for _ in range(self.ingest_contexts(choice) - 1):
                contexts.append(self._local(c.model_path, choice, n_threads=c.n_threads,
                                            fingerprint=first.fingerprint))
        except Exception:
            for ctx in contexts:
                ctx.close()
            raise
        return first if len(contexts) == 1 else ParallelBackend(contexts)

    def _load_pair(self, choice: DeviceChoice) -> tuple[EmbedBackend, EmbedBackend]:
        c = self.config
        ingest = self._ingest(choice)
        try:
            query = self._local(c.model_path, choice, n_threads=c.query_n_threads,
                                fingerprint=ingest.fingerprint)
        except Exception:
            ingest.close()
            raise
        for b in (ingest, query):  # fakes may not say where they run
            if getattr(b, "device", None) is None:
                with contextlib.suppress(Exception):
                    b.device = choice.device  # type: ignore[attr-defined]
        return ingest, query

    def _choices(self) -> list[DeviceChoice]:
        first = choose_device(self.config.device, self._gpu_probe())
        self.gpu_wanted = first.device == "gpu" or self.config.device == "cuda"
        if first.device == "gpu":
            return [first, DeviceChoice("cpu", 0, "GPU load failed: CPU fallback")]
        return [first]

    def _load_local_sync(self) -> tuple[EmbedBackend, EmbedBackend, ActiveDevice, str]:
        """GPU (if possible) → CPU. Raises ModelUnavailable with the last error."""
        errors: list[str] = []
        for choice in self._choices():
            try:
                ingest, query = self._load_pair(choice)
            except ModelUnavailable as exc:
                errors.append(str(exc))
                if choice.device == "gpu":
                    log.warning("loading the model on the GPU failed (%s); trying the CPU", exc)
                continue
            reason = choice.reason
            if errors:
                reason = f"GPU load failed ({errors[0][:300]}): CPU fallback"
            return ingest, query, choice.device, reason
        raise ModelUnavailable(errors[-1])

    async def load(self) -> bool:
        """Load what is missing (in a thread): the model along the fallback chain. False, with
        `error` set, when no vectors can be made."""
        async with self._load_lock:
            self._last_attempt = time.monotonic()
            if not self._injected and not self.local:
                await self._load_main()
            return self.available

    async def _load_main(self) -> None:
        c = self.config
        try:
            ingest, query, device, reason = await asyncio.to_thread(self._load_local_sync)
        except ModelUnavailable as exc:
            local_err = str(exc)
            self.error = local_err
            if self.device == "remote":  # keep the endpoint we have
                return
            if c.fallback_url:
                try:
                    remote = await asyncio.to_thread(self._remote_factory, c)
                except ModelUnavailable as rexc:
                    self._swap(None, None, "none", f"local model unavailable ({local_err}); "
                                                   f"fallback endpoint unusable ({rexc})")
                    self.error = f"{local_err}; {rexc}"
                    log.warning("no embedding model (%s), fallback endpoint unusable (%s): "
                                "running degraded (no vectors)", local_err, rexc)
                    return
                self._swap(remote, remote, "remote", f"local model unavailable ({local_err}): "
                                                     f"using the fallback endpoint")
                log.warning("local embedding model unavailable (%s); using the fallback "
                            "endpoint %s (%s, %d dims)", local_err, c.fallback_url,
                            remote.fingerprint, remote.dim)
                return
            self._swap(None, None, "none", f"local model unavailable ({local_err})")
            log.warning("embedding model unavailable, running degraded (no vectors): %s",
                        local_err)
            return
        self._swap(ingest, query, device, reason)
        self.error = None
        log.info("embedding model loaded on %s: %s (%d dims); %s", device, self.fingerprint,
                 self.dim, reason)

    def _swap(self, ingest: EmbedBackend | None, query: EmbedBackend | None,
              device: ActiveDevice, reason: str) -> None:
        old = [b for b in {id(b): b for b in (self.ingest, self.query)
                           if b is not None}.values() if b is not ingest and b is not query]
        changed = ingest is not self.ingest
        self.ingest, self.query, self.device, self.device_reason = ingest, query, device, reason
        for b in old:
            with contextlib.suppress(Exception):
                b.close()
        if changed:
            self.changed.set()

    async def maybe_reload(self) -> None:
        """While not on the local model, look for it again every `model_retry_s`."""
        c = self.config
        if self._injected or self.local:
            return
        if time.monotonic() - self._last_attempt >= c.model_retry_s:
            await self.load()

    async def _demote_to_cpu(self, exc: BaseException) -> bool:
        """The GPU failed at run time (e.g. out of memory): reload on the CPU."""
        async with self._load_lock:
            if self.device != "gpu":
                return self.local
            log.error("embedding on the GPU failed (%s); reloading the model on the CPU", exc)
            try:
                ingest, query = await asyncio.to_thread(
                    self._load_pair, DeviceChoice("cpu", 0, "GPU failed at run time"))
            except ModelUnavailable as lexc:
                log.error("cannot load the model on the CPU either: %s", lexc)
                return False
            self._swap(ingest, query, "cpu", f"GPU failed at run time ({str(exc)[:300]}): "
                                             f"CPU fallback")
            return True
