"""Load a trained NeRF run from its checkpoint alone: config, scene, fields, device."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import torch

from ..checkpoint import load_checkpoint
from ..config import RunConfig
from ..data.scene import Scene
from ..errors import CheckpointError
from ..fields.nerf import NeRFField
from ..render import Renderer
from ..train.components import build_fields, load_scene, run_dir, select_device
from ..train.evaluate import load_field_weights, renderer_from_checkpoint

__all__ = ["TrainedRun", "load_trained", "output_dir"]


class TrainedRun(NamedTuple):
    """What ``enerf render`` / ``enerf mesh`` need from a checkpoint."""

    cfg: RunConfig
    step: int
    scene: Scene
    fields: dict[str, NeRFField]  # "coarse" and, when trained with N_importance > 0, "fine"
    device: torch.device
    ckpt_path: Path
    renderer: Renderer | None  # the checkpoint's renderer, its occupancy grid restored (None: read off the field)


def load_trained(ckpt_path: str | Path, data_root: Path, device_name: str | None = None) -> TrainedRun:
    """Rebuild the fields of a NeRF checkpoint and load its scene.

    Raises:
        CheckpointError: missing, unreadable or foreign checkpoint, or weights that do not fit
            the network its config describes.
    """
    ckpt_path = Path(ckpt_path)
    payload, cfg = load_checkpoint(ckpt_path)
    models = payload.get("models") or {}
    if "coarse" not in models:
        raise CheckpointError(f"{ckpt_path}: not a NeRF checkpoint (no 'coarse' field weights)")
    device = select_device(device_name or cfg.train.device)
    fields = build_fields(cfg.field, with_fine="fine" in models, device=device)
    load_field_weights(fields, models, ckpt_path)
    for field in fields.values():
        field.eval()
    scene = load_scene(cfg.data, data_root, cfg.render.white_bkgd)
    renderer = renderer_from_checkpoint(payload, cfg, device)
    return TrainedRun(cfg, int(payload["step"]), scene, fields, device, ckpt_path, renderer)


def output_dir(run: TrainedRun, name: str) -> Path:
    """``<run>/<name>``: beside the checkpoint's run folder, wherever the run was moved."""
    ckpt = run.ckpt_path.resolve()
    base = ckpt.parent.parent if ckpt.parent.name == "checkpoints" else run_dir(run.cfg)
    return base / name
