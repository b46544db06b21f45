"""Where the model runs: GPU (all layers offloaded) when llama.cpp can, else the CPU."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Device = Literal["gpu", "cpu"]
#: What /health and the device metric report: a local device, the remote endpoint, or nothing.
ActiveDevice = Literal["gpu", "cpu", "remote", "none"]
ACTIVE_DEVICES: tuple[ActiveDevice, ...] = ("gpu", "cpu", "remote", "none")


@dataclass(frozen=True)
class DeviceChoice:
    device: Device
    n_gpu_layers: int   # -1: every layer (llama.cpp `-ngl`); 0: CPU only
    reason: str


def cpu_features(system_info: str) -> list[str]:
    """The CPU instruction sets a llama.cpp build was compiled for, from its
    `llama_print_system_info()` ("CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | … | CUDA : …"): what
    tells a build for this CPU (AVX512 here) from a portable one (AVX2 at most)."""
    section = re.search(r"\bCPU : (.*?)(?:\|\s*[A-Za-z][\w-]* : |$)", system_info)
    if section is None:
        return []
    return [name for name, value in re.findall(r"(\w+) = (\w+)", section.group(1)) if value != "0"]


def choose_device(setting: str, gpu_supported: bool) -> DeviceChoice:
    """`setting` is "auto" | "cpu" | "cuda". The GPU is used only when the build supports it;
    "cuda" without support falls back to the CPU (the service keeps running; /health says why)."""
    if setting == "cpu":
        return DeviceChoice("cpu", 0, "device=cpu")
    if gpu_supported:
        return DeviceChoice("gpu", -1, f"device={setting}: GPU offload available, all layers")
    if setting == "cuda":
        return DeviceChoice("cpu", 0, "device=cuda but this llama.cpp build has no GPU offload "
                                      "(llama_supports_gpu_offload() is false): CPU fallback")
    return DeviceChoice("cpu", 0, "device=auto: no GPU offload in this llama.cpp build")
