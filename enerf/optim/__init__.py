"""Optimisation beyond the plain Adam (or SGD) step: BNP gradient preconditioning and regularization
in the preconditioned space. ``build_optimizer`` is what training loops call."""

from .bnp import BNP, bnp_conv_transform, bnp_linear_transform, weight_parameter
from .optimizer import BNP_UNDER_ADAM, PreconditionedOptimizer, build_optimizer
from .regularization import adam_diagonal, decoupled_decay_, gradient_regularized_grads, l2_penalty

__all__ = [
    "BNP",
    "bnp_linear_transform",
    "bnp_conv_transform",
    "weight_parameter",
    "PreconditionedOptimizer",
    "build_optimizer",
    "BNP_UNDER_ADAM",
    "l2_penalty",
    "decoupled_decay_",
    "adam_diagonal",
    "gradient_regularized_grads",
]
