"""The radiance fields of a NeRF run, built from its config."""

from __future__ import annotations

import torch
from torch import nn

from ..config import FieldConfig, RenderConfig
from .nerf import NeRFField
from .proposal import ProposalNetworks

__all__ = ["build_fields"]


def build_fields(cfg: FieldConfig, with_fine: bool, device: torch.device,
                 render: RenderConfig | None = None) -> dict[str, nn.Module]:
    """The coarse field, plus a fine one of the same shape when ``with_fine``, plus the
    proposal networks (``proposal``) when ``render`` uses the proposal renderer."""
    fields: dict[str, nn.Module] = {"coarse": NeRFField(cfg).to(device)}
    if with_fine:
        fields["fine"] = NeRFField(cfg).to(device)
    if render is not None and render.renderer == "proposal":
        fields["proposal"] = ProposalNetworks(render.proposal_resolutions, render.proposal_components,
                                              cfg.contraction, cfg.grid_aabb).to(device)
    return fields
