"""Random number state: seeding a run, and the global RNG state a checkpoint carries."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["seed_everything", "rng_state", "restore_rng_state"]


def seed_everything(seed: int) -> torch.Generator:
    """Seed torch and numpy; returns the generator that draws the training batches."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    return torch.Generator().manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """The global torch (CPU and, when present, CUDA) and numpy RNG states."""
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Set the global RNG states saved by ``rng_state``."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
