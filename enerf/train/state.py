"""What every training task (NeRF, shapes) shares: the optimizer its config asks for, and the
loop state a checkpoint carries back on ``--resume``."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Iterable

import torch
from torch import nn

from ..distributed import is_writer
from ..optim import BNP_UNDER_ADAM, PreconditionedOptimizer, build_optimizer
from ..rng import restore_rng_state

__all__ = ["optimizer_from_config", "LoopState", "restore_loop_state"]


def optimizer_from_config(models: nn.Module | Iterable[nn.Module], train) -> PreconditionedOptimizer:
    """Adam or SGD, + BNP / weight decay / gradient regularization, from a train config (``TrainConfig``
    or ``ShapeTrainConfig``: ``optimizer``, ``momentum``, ``lrate``, ``precond``, ``weight_decay``,
    ``decay_space``, ``grad_reg``, and
    ``encoding_lrate`` where present: the learning rate of learned position encodings, ``pos_encoding.*``
    and the proposal networks' ``levels.*.pos_encoding.*``)."""
    encoding_lrate = getattr(train, "encoding_lrate", 0.0)
    lr_scale = None
    if encoding_lrate > 0:
        def lr_scale(name: str) -> float:
            return encoding_lrate / train.lrate if ".pos_encoding." in f".{name}" else 1.0
    if train.precond == "bnp" and train.optimizer == "adam" and is_writer():
        print(f"enerf: note: {BNP_UNDER_ADAM}", file=sys.stderr, flush=True)
    return build_optimizer(models, lr=train.lrate, precond=train.precond, weight_decay=train.weight_decay,
                           decay_space=train.decay_space, grad_reg=train.grad_reg, lr_scale=lr_scale,
                           optimizer=train.optimizer, momentum=train.momentum)


@dataclass
class LoopState:
    """Where a training loop stands: the steps done (= the next step's index) and what it has
    recorded so far."""

    step: int = 0
    history: list = field(default_factory=list)  # periodic evaluations
    kappa_history: list = field(default_factory=list)  # [{step, layers: {name: [kappa_W, kappa_EW]}}]
    train_seconds: float = 0.0
    wall_seconds: float = 0.0  # wall-clock seconds of the loop in this process (steps, evaluations, checkpoints)


def restore_loop_state(payload: dict | None, models: dict[str, nn.Module], optimizer, generator: torch.Generator) -> LoopState:
    """Load weights, optimizer, RNG and the loop's records from a checkpoint payload (None: a fresh start).

    ``models`` maps the payload's ``models`` keys to the modules to fill.
    """
    if payload is None:
        return LoopState()
    for name, module in models.items():
        module.load_state_dict(payload["models"][name])
    optimizer.load_state_dict(payload["optimizer"])
    restore_rng_state(payload["rng"])
    generator.set_state(payload["extra"]["generator"])
    extra = payload["extra"]
    return LoopState(payload["step"], extra.get("history", []), extra.get("kappa_history", []),
                     extra.get("train_seconds", 0.0))
