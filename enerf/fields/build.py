"""The radiance fields of a NeRF run, built from its config."""

from __future__ import annotations

import torch
from torch import nn

from ..config import FieldConfig, RenderConfig
from .nerf import NeRFField

__all__ = ["build_fields"]


def build_fields(cfg: FieldConfig, device: torch.device, render: RenderConfig | None = None) -> dict[str, nn.Module]:
    """The coarse field, plus the networks the estimator of ``render`` trains beside it
    (``Estimator.networks``: the hierarchical estimator's fine field when ``n_importance > 0``,
    the proposal estimator's ``proposal`` networks); ``render`` None: the coarse field alone."""
    fields: dict[str, nn.Module] = {"coarse": NeRFField(cfg).to(device)}
    if render is not None:
        from ..render.registry import estimator_class  # the renderer package imports the fields' modules

        fields.update(estimator_class(render.renderer).networks(render, cfg, device))
    return fields
