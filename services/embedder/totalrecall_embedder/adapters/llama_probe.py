"""What the llama.cpp build this process loads can do: offload to a GPU, and which CPU
instruction sets it was compiled for. Asks the native library, so it is kept out of core/."""

from __future__ import annotations

import logging

from ..core.device import cpu_features

log = logging.getLogger("totalrecall.embedder")


def gpu_offload_supported() -> bool:
    """True when this llama.cpp build can offload to a GPU (CUDA, Metal, Vulkan, …)."""
    try:
        import llama_cpp

        return bool(llama_cpp.llama_supports_gpu_offload())
    except Exception as exc:  # pragma: no cover - broken install
        log.warning("cannot ask llama.cpp about GPU offload: %s", exc)
        return False


def llama_cpu_features() -> list[str]:
    """`cpu_features` of the llama.cpp build this process loads ([] when it cannot say)."""
    try:
        import llama_cpp

        return cpu_features(llama_cpp.llama_print_system_info().decode(errors="replace"))
    except Exception as exc:  # pragma: no cover - broken install
        log.warning("cannot ask llama.cpp about its build: %s", exc)
        return []
