"""Conditioned layers (the paper's idea, on its own) and input encodings."""

from .conditioned_conv import ConditionedConv2d
from .conditioning import CONDITIONERS, PARAMETRIZATIONS, ConditionedLinear, condition_number, condition_numbers, fold_module
from .encoding import PositionalEncoding
from .model_conditioning import condition_model

__all__ = [
    "CONDITIONERS",
    "PARAMETRIZATIONS",
    "ConditionedLinear",
    "ConditionedConv2d",
    "condition_model",
    "condition_number",
    "condition_numbers",
    "fold_module",
    "PositionalEncoding",
]
