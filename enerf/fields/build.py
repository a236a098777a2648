"""The radiance fields of a NeRF run, built from its config."""

from __future__ import annotations

import torch

from ..config import FieldConfig
from .nerf import NeRFField

__all__ = ["build_fields"]


def build_fields(cfg: FieldConfig, with_fine: bool, device: torch.device) -> dict[str, NeRFField]:
    """The coarse field, plus a fine one of the same shape when ``with_fine``."""
    fields = {"coarse": NeRFField(cfg).to(device)}
    if with_fine:
        fields["fine"] = NeRFField(cfg).to(device)
    return fields
