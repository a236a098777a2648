"""The device a run computes on: ``--device auto|cpu|cuda|mps`` (``choose_device``, ``select_device``).

* ``auto`` (the default): CUDA when torch sees a GPU, else the CPU. Apple's MPS is never picked by
  ``auto``: where it is present, the reason says that ``--device mps`` tries it.
* ``cuda``: a CUDA GPU; refused in one line (``ConfigError``) where torch sees none.
* ``mps``: Apple's Metal backend where ``torch.backends.mps.is_available()``; untested (no machine
  this project is measured on has one: the reason says so); refused in one line elsewhere.
* ``cpu``: the CPU.

``enerf train`` states the choice and its reason in its first line (``enerf.config.presets.preset_line``).
"""

from __future__ import annotations

import ctypes
import sys

import torch

from .config import DEVICES
from .errors import ConfigError

__all__ = ["mps_available", "cuda_name", "choose_device", "reuse_freed_memory", "select_device"]

MPS_UNTESTED = "Apple's MPS backend, untested: no machine enerf is measured on has one"


def mps_available() -> bool:
    """Whether torch has Apple's Metal (MPS) backend and a device for it."""
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def cuda_name() -> str:
    """The first CUDA device's name (``NVIDIA H100 80GB HBM3``); ``a CUDA GPU`` where torch cannot say."""
    try:
        return torch.cuda.get_device_name()
    except (AssertionError, RuntimeError):  # no driver, a CPU build, or is_available faked in a test
        return "a CUDA GPU"


def choose_device(name: str) -> tuple[str, str]:
    """(``cpu`` | ``cuda`` | ``mps``, the reason in words) for ``--device name``; ConfigError (one
    line) for a device torch does not see or an unknown name."""
    if name == "auto":
        if torch.cuda.is_available():
            return "cuda", f"--device auto: torch sees {cuda_name()}"
        mps = "; Apple's MPS is present: --device mps tries it, untested" if mps_available() else ""
        return "cpu", f"--device auto: torch sees no CUDA GPU{mps}"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("device cuda was asked for but torch sees no CUDA GPU; use device cpu or auto",
                              ("device",))
        return "cuda", f"--device cuda: {cuda_name()}"
    if name == "mps":
        if not mps_available():
            raise ConfigError("device mps was asked for but torch has no Apple MPS backend here "
                              "(torch.backends.mps.is_available() is False); use device cpu or auto", ("device",))
        return "mps", f"--device mps: {MPS_UNTESTED}"
    if name == "cpu":
        return "cpu", "--device cpu"
    raise ConfigError(f"device {name!r} is not one of {', '.join(DEVICES)}", ("device",))


# glibc's mallopt parameters and the size below which freed blocks stay in the process's heap
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_KEEP_BYTES = 1 << 30


def reuse_freed_memory() -> bool:
    """Let the next step reuse the memory a step frees (glibc's malloc); True where that was set.

    A step allocates the same buffers every step ([rays · samples, width] activations of several MB).
    By default glibc maps blocks above its mmap threshold (which moves, up to 32 MB) fresh and returns
    them on free, and trims the heap's top, so each step pays page faults to zero those pages again:
    2-6 thousand per step of the demo, a number that changes from one process to the next (benchmarks/
    README.md: the cost of --conditioning row). Blocks under 1 GiB now come from the heap and stay there. Elsewhere (macOS, Windows, musl) a
    no-op. Called by ``select_device``, so every command that computes sets it once."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _KEEP_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, _KEEP_BYTES))


def select_device(name: str) -> torch.device:
    """The ``torch.device`` of ``--device name`` (``choose_device``); sets ``reuse_freed_memory``."""
    reuse_freed_memory()
    return torch.device(choose_device(name)[0])
