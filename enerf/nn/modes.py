"""Train / eval mode of networks: entered and left in one place."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator

from torch import nn

__all__ = ["eval_mode"]


@contextmanager
def eval_mode(modules: Iterable[nn.Module]) -> Iterator[None]:
    """Put ``modules`` in eval mode for the block, then give each back its own mode (evaluations
    and viewer frames drawn between training steps leave the run in train mode)."""
    modules = list(modules)
    modes = [m.training for m in modules]
    try:
        for m in modules:
            m.eval()
        yield
    finally:
        for m, mode in zip(modules, modes):
            m.train(mode)
