"""Compiled look-ups (numba) for rendering on a CPU without autograd: the triplane's features and a
baked one-hidden-layer density.

Scoring, videos and the viewer read a capture model at millions of points a view; in torch each
look-up is a dozen passes over [n, 3] and [n, 3, 4] tensors (index arithmetic, bilinear weights,
gathers, products), most of its time spent writing and reading those intermediates. Here a point
is one iteration of a loop, run in parallel over the points (numba's ``prange``, float32 with the
fast-math flags of ``enerf.splats.tiles``: no NaN / inf shortcuts), reading the tables
channels-last so that the C channels of a corner are one contiguous row:

* ``triplane_level``: one level of ``enerf.nn.triplane.TriPlaneEncoding`` (3 bilinear plane reads
  times 3 linear line reads, ``F.grid_sample``'s align_corners / border convention);
* ``baked_density``: density = exp(min(w2 . relu(h(x)) + b2, 15) - 1) where h is the trilinear
  interpolation of a table on a lattice (``enerf.fields.proposal.ProposalField``'s baked form), the
  contraction of ``enerf.nn.contraction`` applied first.

Each kernel is compiled on first use (a few seconds) and cached on disk where numba can write;
``available()`` is False where numba does not import, and the callers keep their torch paths.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch import Tensor

__all__ = ["available", "torch_threads", "triplane_level", "TriplaneLevel", "baked_density", "CONTRACTION_CODES"]

# the contraction of enerf.nn.contraction, as the kernels' integer code
CONTRACTION_CODES = {"none": 0, "mipnerf360": 1, "linf": 2}

_KERNELS = None


def available() -> bool:
    """Whether numba imports (a dependency; a broken install keeps the torch paths)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _kernels():
    """The compiled kernels (``compiled_kernels``), compiled on first use or read from numba's cache."""
    global _KERNELS
    if _KERNELS is None:
        from . import compiled_kernels

        _KERNELS = compiled_kernels.level, compiled_kernels.density, compiled_kernels.level_backward
    return _KERNELS


@contextlib.contextmanager
def torch_threads():
    """Run numba's parallel loops on torch's thread count (``torch.set_num_threads``, ``--threads``;
    at most numba's pool), and give torch that count back after: numba's OpenMP layer, started on
    first use, sets the process's OpenMP threads (torch's too) to all the cores."""
    import numba

    n = torch.get_num_threads()
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        if torch.get_num_threads() != n:
            torch.set_num_threads(n)


def _f32(t: Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).contiguous().numpy()


def triplane_level(x: Tensor, lo: Tensor, scale: Tensor, planes: np.ndarray, lines: np.ndarray, out: Tensor,
                   col: int) -> None:
    """One triplane level's 3 C features into ``out[:, col:col + 3 C]``.

    Args:
        x: Tensor  # [n, 3] float32 CPU positions; u = (x - lo) * scale - 1 in [-1, 1] inside the box
        lo, scale: Tensor  # [3]
        planes: np.ndarray  # [3, r, r, C] float32 channels-last (plane k: rows along its second axis)
        lines: np.ndarray  # [3, r, C] float32
        out: Tensor  # [n, F] float32 contiguous, written in place
    """
    with torch_threads():
        _kernels()[0](_f32(x), _f32(lo), _f32(scale), planes, lines, out.numpy(), col)


class TriplaneLevel(torch.autograd.Function):
    """One triplane level with autograd, for training on a CPU: the forward of ``triplane_level`` and a
    compiled backward into the planes and lines. ``F.grid_sample``'s CPU backward runs on one thread per
    plane and spends half of a capture's training step (``studies/triplane_lookup.py``); this one splits
    the work by plane and channel block, each thread owning its slice of the gradients (the same bits on
    any thread count). No gradient flows to the positions: callers use it where they need none.

    ``TriplaneLevel.apply(x, lo, scale, planes, lines, tables)``:
        x: Tensor  # [n, 3] float32 positions (no gradient); lo, scale: Tensor  # [3]
        planes: Tensor  # [3, C, r, r] float32 parameter; lines: Tensor  # [3, C, r, 1]
        tables: their channels-last copies (np.ndarray [3, r, r, C], [3, r, C]), as
            ``TriPlaneEncoding.channels_last`` keeps them for the current weights
        -> Tensor  # [n, 3 C], plane k's C products at [:, k C:(k + 1) C]
    """

    @staticmethod
    def forward(ctx, x: Tensor, lo: Tensor, scale: Tensor, planes: Tensor, lines: Tensor,
                tables: tuple[np.ndarray, np.ndarray]) -> Tensor:
        out = torch.empty(x.shape[0], 3 * planes.shape[1])
        triplane_level(x, lo, scale, *tables, out, 0)
        ctx.save_for_backward(x, lo, scale)
        ctx.tables = tables
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, lo, scale = ctx.saved_tensors
        planes, lines = ctx.tables
        grad_planes, grad_lines = np.zeros_like(planes), np.zeros_like(lines)
        blocks = max(1, min(planes.shape[3], torch.get_num_threads()))
        with torch_threads():
            _kernels()[2](_f32(x), _f32(lo), _f32(scale), planes, lines, _f32(grad), 0, blocks, grad_planes,
                          grad_lines)
        return (None, None, None, torch.from_numpy(grad_planes).permute(0, 3, 1, 2).contiguous(),
                torch.from_numpy(grad_lines).permute(0, 2, 1).unsqueeze(-1).contiguous(), None)


def baked_density(x: Tensor, contraction: str, lo: Tensor, scale: Tensor, table: np.ndarray, w2: np.ndarray,
                  b2: float) -> Tensor:
    """exp(min(w2 . relu(trilinear(table, u)) + b2, 15) - 1) at u = (contract(x) - lo) * scale - 1.

    Args:
        x: Tensor  # [n, 3] float32 CPU positions (before the contraction)
        contraction: ``none``, ``mipnerf360`` or ``linf``
        table: np.ndarray  # [r, r, r, H] float32, the hidden layer's pre-activations at the lattice's
            vertices (axes x, y, z of u)
        w2: np.ndarray  # [H] float32; b2: the output layer

    Returns:
        Tensor  # [n] density > 0
    """
    out = np.empty(x.shape[0], np.float32)
    with torch_threads():
        _kernels()[1](_f32(x), CONTRACTION_CODES[contraction], _f32(lo), _f32(scale), table, w2, np.float32(b2), out)
    return torch.from_numpy(out)
