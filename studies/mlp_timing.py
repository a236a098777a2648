"""Shared by the per-step cost benchmarks of the NeRF MLP (``studies.conditioning_cost``,
``studies.methods_cost``): their common flags, the device set-up, one random batch and one timed
training step."""

from __future__ import annotations

import argparse
import time
from typing import Callable, NamedTuple

import torch
from torch import Tensor

__all__ = ["add_mlp_arguments", "Device", "set_up", "Batch", "random_batch", "timed_training_step"]


def add_mlp_arguments(parser: argparse.ArgumentParser) -> None:
    """The network shape, batch, repetitions, threads, conditioned layers and device flags."""
    parser.add_argument("--width", type=int, default=256, help="netwidth (view branch: width // 2)")
    parser.add_argument("--depth", type=int, default=8, help="netdepth")
    parser.add_argument("--points", type=int, default=16384, help="points per step")
    parser.add_argument("--steps", type=int, default=10, help="timed repetitions per variant (after 2 warm-up)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--conditioned_layers", default="hidden")
    parser.add_argument("--device", default="cpu", help="cpu | cuda")


class Device(NamedTuple):
    device: torch.device
    sync: Callable[[], None]  # waits for the device (a no-op on CPU)
    shape: dict  # NeRFField keyword arguments: netdepth, netwidth, view_width


def set_up(args: argparse.Namespace) -> Device:
    """Torch threads (``--threads``), the device, its synchronisation and the network shape."""
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    return Device(device, sync, dict(netdepth=args.depth, netwidth=args.width, view_width=args.width // 2))


class Batch(NamedTuple):
    x: Tensor  # [points, 3] positions in [-1, 1]
    dirs: Tensor  # [points, 3] unit view directions
    target: Tensor  # [points, 3] random colours


def random_batch(points: int, device: torch.device) -> Batch:
    """A batch drawn from torch's global generator: positions, then directions, then colours."""
    x = torch.rand(points, 3, device=device) * 2 - 1
    dirs = torch.nn.functional.normalize(torch.randn(points, 3, device=device), dim=-1)
    return Batch(x, dirs, torch.rand(points, 3, device=device))


def timed_training_step(field: torch.nn.Module, opt, batch: Batch, sync: Callable[[], None],
                        backward: Callable[[Tensor], None] | None = None) -> float:
    """Seconds of one forward + backward + optimizer step on an MSE loss against the batch's
    colours (plus 1e-3 x the mean density); ``backward`` defaults to ``loss.backward()``."""
    sync()
    tic = time.perf_counter()
    rgb, sigma = field(batch.x, batch.dirs)
    loss = torch.nn.functional.mse_loss(rgb, batch.target) + 1e-3 * sigma.mean()
    opt.zero_grad(set_to_none=True)
    (backward or Tensor.backward)(loss)
    opt.step()
    sync()
    return time.perf_counter() - tic
