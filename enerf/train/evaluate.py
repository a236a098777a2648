"""Held-out evaluation: render test views, score PSNR / SSIM / LPIPS, write metrics.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import imageio.v3 as iio
import numpy as np
import torch

from ..checkpoint import atomic_write_bytes, atomic_write_text, load_checkpoint
from ..config import RenderConfig, RunConfig
from ..data.scene import Scene
from ..fields.nerf import NeRFField
from ..metrics import LPIPS_MIN_SIZE, image_metrics, make_lpips
from ..render.volume import render_image
from .components import build_fields, load_scene, render_fn, run_dir, select_device

__all__ = ["render_view", "evaluate_views", "summarize", "write_metrics", "evaluate_checkpoint"]


def render_view(
    scene: Scene, index: int, fields: dict[str, NeRFField], cfg: RenderConfig, device: torch.device
) -> np.ndarray:
    """Render view ``index`` of ``scene``; returns rgb [H, W, 3] float32 in [0, 1]."""
    for field in fields.values():
        field.eval()
    out = render_image(
        scene.rays(index, device=device),
        render_fn(fields["coarse"]),
        render_fn(fields.get("fine")),
        cfg,
    )
    return out["rgb"].clamp(0.0, 1.0).cpu().numpy()


def evaluate_views(
    scene: Scene,
    views: Sequence[int],
    fields: dict[str, NeRFField],
    cfg: RenderConfig,
    device: torch.device,
    lpips_metric=None,
    image_dir: Path | None = None,
) -> list[dict]:
    """Per-view metrics; optionally saves each rendering as ``image_dir/view_NNN.png``."""
    per_image = []
    for index in views:
        pred = render_view(scene, int(index), fields, cfg, device)
        scores = image_metrics(pred, scene.images[int(index)], lpips_metric)
        per_image.append({"view": int(index), **scores})
        if image_dir is not None:
            png = iio.imwrite("<bytes>", (pred * 255 + 0.5).astype(np.uint8), extension=".png")
            atomic_write_bytes(image_dir / f"view_{int(index):03d}.png", png)
    return per_image


def summarize(per_image: list[dict], lpips_error: str | None) -> dict:
    """Means over views; ``lpips`` is None (with ``lpips_error``) when it could not be computed."""
    summary = {
        "psnr": float(np.mean([p["psnr"] for p in per_image])),
        "ssim": float(np.mean([p["ssim"] for p in per_image])),
        "lpips": None,
        "lpips_error": lpips_error,
    }
    lp = [p["lpips"] for p in per_image]
    if lp and all(v is not None for v in lp):
        summary["lpips"] = float(np.mean(lp))
        summary["lpips_error"] = None
    elif lpips_error is None:
        summary["lpips_error"] = f"some views are smaller than LPIPS' minimum of {LPIPS_MIN_SIZE} px"
    return summary


def write_metrics(path: Path, metrics: dict) -> None:
    atomic_write_text(path, json.dumps(metrics, indent=2) + "\n")


def evaluate_checkpoint(ckpt_path: str | Path, data_root: Path, device_name: str | None = None) -> dict:
    """Recompute metrics.json for a run from its checkpoint alone (``enerf eval``)."""
    payload, cfg = load_checkpoint(ckpt_path)
    device = select_device(device_name or cfg.train.device)
    scene = load_scene(cfg.data, data_root)
    fields = build_fields(cfg.field, with_fine="fine" in payload["models"], device=device)
    for name, field in fields.items():
        field.load_state_dict(payload["models"][name])
    lpips_metric, lpips_error = make_lpips(device) if cfg.train.compute_lpips else (None, "disabled by config")
    ckpt_path = Path(ckpt_path)
    # A checkpoint lives in <run>/checkpoints/; results go beside it, wherever the run was moved.
    out_dir = ckpt_path.resolve().parent.parent if ckpt_path.parent.name == "checkpoints" else run_dir(cfg)
    per_image = evaluate_views(
        scene, scene.i_test, fields, cfg.render, device, lpips_metric, image_dir=out_dir / "test_views"
    )
    previous = {}
    metrics_path = out_dir / "metrics.json"
    if metrics_path.is_file():
        previous = json.loads(metrics_path.read_text())
    metrics = {
        **previous,
        **summarize(per_image, lpips_error),
        "per_image": per_image,
        "steps": int(payload["step"]),
        "conditioning": cfg.field.conditioning,
        "conditioned_layers": cfg.field.conditioned_layers,
        "checkpoint": str(ckpt_path),
    }
    metrics.setdefault("train_seconds", payload["extra"].get("train_seconds"))
    write_metrics(metrics_path, metrics)
    return metrics
