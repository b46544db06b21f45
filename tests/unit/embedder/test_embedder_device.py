"""Device selection and the fallback chain GPU → CPU → endpoint → none (fakes only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from embedder_fakes import FakeBackend, FakeFactory
from totalrecall_embedder.core.backend import ModelUnavailable
from totalrecall_embedder.core.device import choose_device, cpu_features
from totalrecall_embedder.core.engine import Engine, EngineConfig
from totalrecall_embedder.metrics import Metrics


@pytest.mark.parametrize(("setting", "gpu", "device", "layers", "why"), [
    ("auto", True, "gpu", -1, "GPU offload available"),
    ("auto", False, "cpu", 0, "no GPU offload"),
    ("cuda", True, "gpu", -1, "GPU offload available"),
    ("cuda", False, "cpu", 0, "device=cuda but"),
    ("cpu", True, "cpu", 0, "device=cpu"),
])
def test_choose_device(setting: str, gpu: bool, device: str, layers: int, why: str) -> None:
    c = choose_device(setting, gpu)
    assert (c.device, c.n_gpu_layers) == (device, layers) and why in c.reason


@pytest.mark.parametrize(("info", "features"), [
    ("CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
     "AVX512_VNNI = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | ",
     ["SSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "AVX512", "AVX512_VNNI", "LLAMAFILE", "OPENMP",
      "REPACK"]),
    ("CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 0 | OPENMP = 1 | ",
     ["SSE3", "AVX", "AVX2", "OPENMP"]),
    # a GPU build: the CUDA section's settings are not CPU features
    ("CUDA : ARCHS = 500,610 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | CPU : SSE3 = 1 | "
     "AVX2 = 1 | ", ["SSE3", "AVX2"]),
    ("CPU : AVX2 = 1 | Metal : EMBED_LIBRARY = 1 | ", ["AVX2"]),
    ("", []),
])
def test_cpu_features_of_a_build(info: str, features: list[str]) -> None:
    assert cpu_features(info) == features


def model(tmp_path: Path) -> Path:
    p = tmp_path / "mini.f16.gguf"
    p.write_bytes(b"x")
    return p


def engine(tmp_path: Path, factory: Any, *, gpu: bool = True, remote: Any = None,
           **cfg: Any) -> Engine:
    cfg.setdefault("model_retry_s", 0.0)
    return Engine(EngineConfig(model_path=model(tmp_path), **cfg),
                  local_factory=factory, gpu_probe=lambda: gpu, remote_factory=remote)


async def test_gpu_offloads_every_layer_with_larger_batches(tmp_path: Path) -> None:
    f = FakeFactory()
    eng = engine(tmp_path, f, gpu_n_batch=2048, gpu_batch_max=256, gpu_rpc_batch_chunk=200,
                 batch_max=64, rpc_batch_chunk=16)
    assert await eng.load()
    assert eng.device == "gpu" and "all layers" in eng.device_reason
    ingest, query = f.loads
    assert ingest["n_gpu_layers"] == -1 and ingest["n_batch"] == 2048 and ingest["n_ctx"] == 256
    assert query["n_gpu_layers"] == -1 and query["n_batch"] == 256  # queries are short
    assert eng.batch_max == 256 and eng.rpc_chunk == 200
    m = Metrics()
    m.observe_engine(eng)
    assert m.device_info.labels(device="gpu")._value.get() == 1
    assert m.device_info.labels(device="cpu")._value.get() == 0
    assert m.fallback_state._value.get() == 0


async def test_gpu_load_failure_falls_back_to_cpu(tmp_path: Path) -> None:
    f = FakeFactory(fail_gpu=True)
    eng = engine(tmp_path, f, batch_max=64, ingest_workers=1)
    assert await eng.load()
    assert eng.device == "cpu" and eng.local
    assert "GPU load failed" in eng.device_reason and "CUDA out of memory" in eng.device_reason
    assert [ld["n_gpu_layers"] for ld in f.loads] == [-1, 0, 0]  # gpu ingest, cpu ingest+query
    assert eng.batch_max == 64
    m = Metrics()
    m.observe_engine(eng)
    assert m.device_info.labels(device="cpu")._value.get() == 1
    assert m.fallback_state._value.get() == 2  # a GPU was there but is not used (alert)


async def test_no_gpu_support_never_tries_it(tmp_path: Path) -> None:
    f = FakeFactory()
    eng = engine(tmp_path, f, gpu=False, device="cuda")
    assert await eng.load()
    assert eng.device == "cpu" and "device=cuda but" in eng.device_reason
    assert all(ld["n_gpu_layers"] == 0 for ld in f.loads)
    assert eng.fallback_state == 2  # asked for explicitly
    (tmp_path / "a").mkdir()
    auto = engine(tmp_path / "a", FakeFactory(), gpu=False, device="auto")
    await auto.load()
    assert auto.device == "cpu" and auto.fallback_state == 0  # no GPU: CPU is as asked


async def test_gpu_failing_at_run_time_is_demoted_to_cpu(tmp_path: Path) -> None:
    f = FakeFactory(gpu_embed_error=True)
    eng = engine(tmp_path, f)
    await eng.load()
    assert eng.device == "gpu"
    gpu_ingest = eng.ingest
    vecs = await eng.embed_ingest(["one", "two"])
    assert vecs is not None and all(v is not None for v in vecs)
    assert eng.device == "cpu" and "GPU failed at run time" in eng.device_reason
    assert isinstance(gpu_ingest, FakeBackend) and gpu_ingest.closed


async def test_endpoint_fallback_and_return_to_the_local_model(tmp_path: Path) -> None:
    f = FakeFactory(fail=True)
    remote = FakeBackend(dim=16, fingerprint="remote:emb", device="remote")
    eng = engine(tmp_path, f, gpu=False, remote=lambda c: remote, fallback_url="http://x")
    assert await eng.load()
    assert eng.device == "remote" and not eng.local and eng.fingerprint == "remote:emb"
    assert eng.error and "cannot load" in eng.error
    assert eng.embed_query(["q"])[0] and remote.calls == [["q"]]
    m = Metrics()
    m.observe_engine(eng)
    assert m.fallback_state._value.get() == 3
    # still no local model: the endpoint is kept (not probed again)
    await eng.maybe_reload()
    assert eng.ingest is remote and not remote.closed
    # the local model is back: picked up, the endpoint closed
    f.fail = False
    await eng.maybe_reload()
    assert eng.device == "cpu" and eng.fingerprint == "mini.f16:abc" and remote.closed


async def test_endpoint_unusable_means_no_vectors(tmp_path: Path) -> None:
    def broken(c: Any) -> Any:
        raise ModelUnavailable("fallback endpoint http://x unusable: connection refused")

    eng = engine(tmp_path, FakeFactory(fail=True), remote=broken, fallback_url="http://x")
    assert await eng.load() is False
    assert eng.device == "none" and eng.error and "connection refused" in eng.error
    assert await eng.embed_ingest(["x"]) is None


async def test_a_failing_endpoint_is_dropped_not_retried_per_text(tmp_path: Path) -> None:
    remote = FakeBackend(dim=16, fingerprint="remote:emb", device="remote", fail_on="")
    eng = engine(tmp_path, FakeFactory(fail=True), gpu=False, remote=lambda c: remote,
                 fallback_url="http://x", model_retry_s=3600)
    await eng.load()
    assert eng.device == "remote"
    vecs = await eng.embed_ingest(["a", "b", "c"])
    assert vecs == [None, None, None] and len(remote.calls) == 1  # one try, not one per text
    assert eng.device == "none" and "fallback endpoint failed" in eng.device_reason
    assert remote.closed
