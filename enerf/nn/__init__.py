"""Conditioned layers (the paper's idea, on its own) and input encodings."""

from .conditioning import CONDITIONERS, PARAMETRIZATIONS, ConditionedLinear, condition_number, condition_numbers, fold_module
from .encoding import PositionalEncoding

__all__ = [
    "CONDITIONERS",
    "PARAMETRIZATIONS",
    "ConditionedLinear",
    "condition_number",
    "condition_numbers",
    "fold_module",
    "PositionalEncoding",
]
