"""What every training run (NeRF, shapes) shares: the optimizer its config asks for, the learning
rate of every parameter group at every step, and the loop state a checkpoint carries back on
``--resume``.

The learning rate, the one home of the schedule: a parameter's rate at step ``s`` is::

    lrate * 0.1 ** (s / (lrate_decay * 1000))      nerf-pytorch's exponential decay (lrate_decay in
                                                   thousands of steps; 0: constant), NeRF and shapes alike
          * lrate_scale                            learning-rate sweeps (enerf compare's COND*S modes)
          * group scale                            encoding_lrate / lrate for learned position encodings
                                                   (``pos_encoding.*``), 1 for everything else
          * cooldown_factor(progress)              the last ``lrate_cooldown`` of the run anneals to a tenth

``progress`` (``training_progress``) is how far the run is, by steps or by training time under a
time budget, whichever is further along; the loop measures it (it owns the clock).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import torch
from torch import nn

from ..checkpoint import load_weights
from ..optim import BNP_UNDER_ADAM, PreconditionedOptimizer, build_optimizer
from ..rng import restore_rng_state
from ..distributed import is_writer, reduce_batch_moments

__all__ = ["optimizer_from_config", "learning_rate", "set_learning_rates", "training_progress",
           "cooldown_factor", "LoopState", "restore_loop_state"]


def optimizer_from_config(models: nn.Module | Iterable[nn.Module], train) -> PreconditionedOptimizer:
    """Adam or SGD, + BNP / weight decay / gradient regularization, from a train config (``TrainConfig``
    or ``ShapeTrainConfig``: ``optimizer``, ``momentum``, ``lrate``, ``precond``, ``weight_decay``,
    ``decay_space``, ``grad_reg``, ``rate_scale``): one parameter group per
    relative rate (``train.rate_scale``); BNP pools its batch moments over the ranks."""
    if train.precond == "bnp" and train.optimizer == "adam" and is_writer():
        print(f"enerf: note: {BNP_UNDER_ADAM}", file=sys.stderr, flush=True)
    return build_optimizer(models, lr=train.lrate, precond=train.precond, weight_decay=train.weight_decay,
                           decay_space=train.decay_space, grad_reg=train.grad_reg,
                           lr_scale=train.rate_scale, reduce_moments=reduce_batch_moments,
                           optimizer=train.optimizer, momentum=train.momentum)


def training_progress(step: int, iters: int, seconds: float, time_budget: float) -> float:
    """How far through its run a step is, in [0, 1]: the larger of ``step / iters`` and, with a
    time budget, ``seconds / time_budget`` (training seconds spent before the step)."""
    progress = step / iters
    if time_budget > 0:
        progress = max(progress, seconds / time_budget)
    return min(progress, 1.0)


def cooldown_factor(progress: float, cooldown: float) -> float:
    """What the learning rate is multiplied by at ``progress`` (``training_progress``): 1 before the
    last ``cooldown`` fraction of the run, then ``0.1 ** ((progress - (1 - cooldown)) / cooldown)``,
    down to 0.1 at the end; always 1 when ``cooldown`` is 0."""
    start = 1.0 - cooldown
    if cooldown <= 0 or progress <= start:
        return 1.0
    return 0.1 ** ((progress - start) / cooldown)


def learning_rate(train, step: int, progress: float = 0.0, scale: float = 1.0) -> float:
    """The learning rate at ``step`` of a parameter group of relative rate ``scale``
    (``train.rate_scale``) under a train config (``TrainConfig`` or ``ShapeTrainConfig``: ``lrate``,
    ``lrate_decay``, ``lrate_cooldown``)."""
    lr = train.lrate if train.lrate_decay <= 0 else train.lrate * 0.1 ** (step / (train.lrate_decay * 1000))
    lr = lr * scale
    factor = cooldown_factor(progress, train.lrate_cooldown)
    return lr * factor if factor != 1.0 else lr


def set_learning_rates(optimizer, train, step: int, progress: float = 0.0) -> float:
    """Set every parameter group of ``optimizer`` to its ``learning_rate`` (each group carries its
    ``lr_scale``); returns the network's rate (``train.rate_scale()``), the one logged."""
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(train, step, progress, group.get("lr_scale", 1.0))
    return learning_rate(train, step, progress, train.rate_scale())


@dataclass
class LoopState:
    """Where a training loop stands: the steps done (= the next step's index) and what it has
    recorded so far."""

    step: int = 0
    history: list = field(default_factory=list)  # periodic evaluations
    kappa_history: list = field(default_factory=list)  # [{step, layers: {name: [kappa_W, kappa_EW]}}]
    train_seconds: float = 0.0
    wall_seconds: float = 0.0  # wall-clock seconds of the loop in this process (steps, evaluations, checkpoints)


def restore_loop_state(payload: dict | None, fields: dict[str, nn.Module], optimizer, generator: torch.Generator,
                       ckpt_path: str | Path = "the checkpoint") -> LoopState:
    """Load weights (``checkpoint.load_weights``), optimizer, RNG and the loop's records from a
    checkpoint payload read from ``ckpt_path`` (None: a fresh start).

    ``fields`` maps the payload's ``fields`` keys to the modules to fill.
    """
    if payload is None:
        return LoopState()
    load_weights(fields, payload["fields"], ckpt_path)
    optimizer.load_state_dict(payload["optimizer"])
    restore_rng_state(payload["rng"])
    generator.set_state(payload["extra"]["generator"])
    extra = payload["extra"]
    return LoopState(payload["step"], extra.get("history", []), extra.get("kappa_history", []),
                     extra.get("train_seconds", 0.0))
