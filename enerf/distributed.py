"""Data-parallel training on several processes with ``torch.distributed`` (gloo on CPU, NCCL on CUDA).

``torchrun --nproc_per_node N -m enerf train ...`` starts N copies of the trainer with ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` set; ``process_group`` joins
them. One step on N processes is one step of a single process with the same global ray batch:

* every rank draws the SAME global batch of ray indices (the run's seeded generator, the same
  seed and state on every rank) and keeps its own contiguous share (``shard_batch``);
* per-ray randomness (stratified jitter, importance samples, density noise) comes from a
  generator of the rank's own (``rank_generator``); with ``perturb`` off a run on N processes
  equals the one-process run to rounding, with it on the two are equal in distribution;
* after ``backward()`` every gradient is all-reduced, weighted by the rank's share of the rays
  (``average_gradients``): an explicit all-reduce of ``.grad`` after ``backward()`` rather
  than ``DistributedDataParallel``'s bucket hooks;
* BNP pools its batch moments over the ranks before it updates its statistics
  (``reduce_batch_moments``): the preconditioner sees the global batch;
* occupancy grids (their update: ``enerf.render.grid_estimator``) pool the visibility every rank saw (``all_reduce_max_``) and then take
  rank 0's grid (``broadcast_buffers``), so every rank marches through the same cells;
* rank 0 alone writes checkpoints, metrics, TensorBoard and progress (``is_writer``).

A rank that dies (or stops answering for ``--dist_timeout`` seconds) makes every collective of
the others fail; they exit with one line (``DistributedError``) instead of hanging.
With one process (no ``WORLD_SIZE`` > 1 in the environment) every function here is a no-op.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from datetime import timedelta
from typing import Iterable, Iterator, Sequence

import torch
import torch.distributed as dist
from torch import Tensor, nn

from .errors import ConfigError, EnerfError

__all__ = ["DistributedError", "process_group", "world_size", "rank", "is_writer", "rank_device",
           "shard_bounds", "shard_batch", "rank_generator", "sum_over_ranks", "any_rank", "average_gradients",
           "reduce_batch_moments", "all_reduce_max_", "broadcast_buffers", "broadcast_parameters"]


class DistributedError(EnerfError):
    """Another rank died or stopped answering; this one stops too."""


_RANK_GENERATORS: dict[int, tuple[torch.Generator, torch.Generator]] = {}  # id -> (run's, rank's)


def world_size() -> int:
    """Processes in the run (1 without a process group)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    """This process's rank (0 without a process group)."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def is_writer() -> bool:
    """True on the one process that writes files and prints: rank 0 (the one place that decides).
    Before the process group starts (``process_group``), torchrun's ``RANK`` says which process
    will be rank 0; without torchrun there is one process, the writer."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    return _env_int("RANK", 0) == 0


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        raise ConfigError(f"environment variable {name}={value!r} is not an integer; launch with torchrun") from None


@contextmanager
def process_group(device: str, timeout_s: float, grad_reg: float = 0.0) -> Iterator[int]:
    """Join the process group torchrun's environment describes (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR, MASTER_PORT) for the block, and leave it afterwards; yields the world size.

    Nothing happens without ``WORLD_SIZE`` > 1 or when a group exists already (a caller that
    made it keeps it). ``device``: the run's ``--device`` (NCCL for cuda, gloo otherwise).
    """
    size = _env_int("WORLD_SIZE", 1)
    if size <= 1 or dist.is_initialized():
        yield world_size()
        return
    if not dist.is_available():
        raise ConfigError("WORLD_SIZE > 1 but this torch build has no torch.distributed; run one process")
    if grad_reg > 0:
        raise ConfigError("--grad_reg needs the gradient of the global batch's loss inside backward; "
                          "train it on one process (without torchrun)")
    if not timeout_s > 0:
        raise ConfigError(f"--dist_timeout must be > 0 seconds, got {timeout_s}")
    missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)]
    if missing:
        raise ConfigError(f"WORLD_SIZE={size} but {', '.join(missing)} not set; launch with torchrun --nproc_per_node N")
    cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(_env_int("LOCAL_RANK", 0))
    try:
        dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=timeout_s))
    except (RuntimeError, ValueError) as exc:
        raise DistributedError(f"could not join the process group at {os.environ['MASTER_ADDR']}:"
                               f"{os.environ['MASTER_PORT']}: {_first_line(exc)}") from None
    try:
        yield size
    finally:
        _RANK_GENERATORS.clear()
        dist.destroy_process_group()


def rank_device(device: torch.device) -> torch.device:
    """``device`` on this rank: ``cuda:LOCAL_RANK`` for CUDA under a process group."""
    if device.type == "cuda" and world_size() > 1:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _collective(fn, *args, **kwargs):
    """Run one collective; a dead or silent peer becomes a one-line ``DistributedError``."""
    try:
        return fn(*args, **kwargs)
    except RuntimeError as exc:  # DistBackendError, gloo "Connection closed by peer", timeouts
        raise DistributedError(f"rank {rank()} of {world_size()}: another rank stopped or did not answer "
                               f"({_first_line(exc)}); stopping this one too") from None


def shard_bounds(n: int, size: int | None = None, index: int | None = None) -> tuple[int, int]:
    """[start, stop) of rank ``index``'s contiguous share of ``n`` items among ``size`` ranks."""
    size = world_size() if size is None else size
    index = rank() if index is None else index
    return n * index // size, n * (index + 1) // size


def shard_batch(rays, target: Tensor, *more: Tensor):
    """This rank's share of a global batch: ``rays`` (a named tuple of [n, c] tensors), ``target``
    [n, 3] and any ``more`` [n, ...] -> the same for [n_rank] rows. Unchanged on one process."""
    size = world_size()
    if size == 1:
        return rays, target, *more
    n = target.shape[0]
    if n < size:
        raise ConfigError(f"a ray batch of {n} rays cannot be shared by {size} processes; raise --N_rand")
    start, stop = shard_bounds(n, size)
    return type(rays)(*(field[start:stop] for field in rays)), target[start:stop], *(t[start:stop] for t in more)


def rank_generator(generator: torch.Generator) -> torch.Generator:
    """The generator of this rank's per-ray randomness: ``generator`` itself on one process,
    else one seeded from ``generator``'s state and the rank (made on first use)."""
    if world_size() == 1:
        return generator
    own = _RANK_GENERATORS.get(id(generator), (None, None))[1]
    if own is None:
        state = generator.get_state().to(torch.int64)
        seed = (int((state * torch.arange(1, state.numel() + 1)).sum()) * 1_000_003 + rank()) % (2**63)
        own = torch.Generator(device=generator.device).manual_seed(seed)
        _RANK_GENERATORS[id(generator)] = (generator, own)  # holding the run's keeps its id unique
    return own


def sum_over_ranks(*counts: int | Tensor) -> tuple[int, ...]:
    """The sums over all ranks of a few integer counts (the counts themselves on one process)."""
    values = [int(c) for c in counts]
    if world_size() == 1:
        return tuple(values)
    t = torch.tensor(values, dtype=torch.int64, device=_comm_device())
    _collective(dist.all_reduce, t)
    return tuple(int(v) for v in t.tolist())


def any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is true on some rank (a stop decision all must share)."""
    if world_size() == 1:
        return bool(flag)
    t = torch.tensor([int(bool(flag))], device=_comm_device())
    _collective(dist.all_reduce, t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def max_over_ranks(value: float) -> float:
    """The largest ``value`` over all ranks (``value`` itself on one process)."""
    if world_size() == 1:
        return float(value)
    t = torch.tensor([float(value)], dtype=torch.float64, device=_comm_device())
    _collective(dist.all_reduce, t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _comm_device() -> torch.device:
    """Where tensors for the backend live: the current GPU for NCCL, the CPU for gloo."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


@torch.no_grad()
def average_gradients(params: Sequence[Tensor], share: float) -> None:
    """Replace every ``.grad`` by the gradient of the global batch: the sum over ranks of
    ``share`` x the rank's gradient, ``share`` = this rank's rays / the global batch's (the
    loss is a per-ray mean). A parameter with a gradient on some rank gets one on all (zeros
    where it had none); one without a gradient anywhere keeps None (Adam skips it)."""
    if world_size() == 1:
        return
    params = list(params)
    device = params[0].device if params else _comm_device()
    has = torch.tensor([p.grad is not None for p in params], dtype=torch.int32, device=_comm_device())
    _collective(dist.all_reduce, has, op=dist.ReduceOp.MAX)
    live = [p for p, h in zip(params, has.tolist()) if h]
    if not live:
        return
    for p in live:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in live]).to(device) * share
    _collective(dist.all_reduce, flat)
    offset = 0
    for p in live:
        n = p.grad.numel()
        p.grad.copy_(flat[offset: offset + n].view_as(p.grad))
        offset += n


@torch.no_grad()
def reduce_batch_moments(states: Sequence) -> None:
    """Pool BNP's per-layer batch moments over all ranks, in place (``enerf.optim.bnp``'s
    ``_LayerState``: ``batch_count``, ``batch_items``, ``batch_mean`` [n_in], ``batch_m2`` [n_in]),
    so that they are the moments of the global batch: counts add, means are count-weighted,
    M2 = Σ_r (M2_r + count_r (mean_r - mean)²) (Chan et al.'s parallel formula, in float64)."""
    if world_size() == 1 or not states:
        return
    dev = _comm_device()
    widths = [s.mean.numel() for s in states]
    counts = torch.tensor([[s.batch_count, s.batch_items] for s in states], dtype=torch.float64, device=dev)
    means = torch.cat([_moment(s.batch_mean, w) for s, w in zip(states, widths)]).to(dev)
    local_n = counts[:, 0].repeat_interleave(torch.tensor(widths, device=dev))
    _collective(dist.all_reduce, counts)
    weighted = means * local_n
    _collective(dist.all_reduce, weighted)
    total_n = counts[:, 0].repeat_interleave(torch.tensor(widths, device=dev))
    mean = weighted / total_n.clamp_min(1.0)
    m2 = torch.cat([_moment(s.batch_m2, w) for s, w in zip(states, widths)]).to(dev)
    m2 = m2 + local_n * (means - mean).square()
    _collective(dist.all_reduce, m2)
    offset = 0
    for s, w, (count, items) in zip(states, widths, counts.tolist()):
        s.batch_count, s.batch_items = int(count), int(items)
        if s.batch_count > 0:
            s.batch_mean = mean[offset: offset + w].to(s.mean)
            s.batch_m2 = m2[offset: offset + w].to(s.mean)
        offset += w


def _moment(value: Tensor | None, width: int) -> Tensor:
    """A layer's batch moment as float64 [width]; zeros for a layer that saw no rows here."""
    return torch.zeros(width, dtype=torch.float64) if value is None else value.detach().double().cpu()


@torch.no_grad()
def all_reduce_max_(tensor: Tensor) -> bool:
    """Element-wise maximum over all ranks, in place; returns whether ranks were reduced."""
    if world_size() == 1:
        return False
    t = tensor.to(_comm_device())
    _collective(dist.all_reduce, t, op=dist.ReduceOp.MAX)
    tensor.copy_(t)
    return True


@torch.no_grad()
def broadcast_buffers(module: nn.Module) -> bool:
    """Copy rank 0's buffers of ``module`` (e.g. an occupancy grid) to every rank, in place;
    returns whether anything was sent (False on one process)."""
    if world_size() == 1:
        return False
    for buf in module.buffers():
        t = buf.to(_comm_device(), torch.uint8 if buf.dtype == torch.bool else buf.dtype)
        _collective(dist.broadcast, t, src=0)
        buf.copy_(t)
    return True


@torch.no_grad()
def broadcast_parameters(modules: Iterable[nn.Module]) -> None:
    """Start every rank from rank 0's weights (and buffers)."""
    if world_size() == 1:
        return
    for module in modules:
        for p in module.parameters():
            t = p.detach().to(_comm_device())
            _collective(dist.broadcast, t, src=0)
            p.copy_(t)
        broadcast_buffers(module)
