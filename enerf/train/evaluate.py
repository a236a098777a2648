"""Held-out evaluation: render test views, score PSNR / SSIM / LPIPS, write metrics.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import imageio.v3 as iio
import numpy as np
import torch

from ..checkpoint import atomic_write_bytes, atomic_write_json, load_checkpoint
from ..config import RenderConfig, RunConfig
from ..data.rays import Rays
from ..data.scene import Scene
from ..errors import CheckpointError, ConfigError
from ..fields.nerf import NeRFField
from ..metrics import LPIPS_MIN_SIZE, image_metrics, make_lpips
from ..render import Renderer, build_renderer
from ..runfolder import RunLock, check_output_dir
from .components import build_fields, field_fns, load_scene, run_dir, select_device

__all__ = [
    "render_rays_image",
    "render_view",
    "renderer_from_checkpoint",
    "evaluate_views",
    "summarize",
    "write_metrics",
    "read_metrics",
    "load_field_weights",
    "evaluate_checkpoint",
]


def renderer_from_checkpoint(payload: dict, cfg: RunConfig, device: torch.device) -> Renderer | None:
    """The renderer a checkpoint was trained with, its estimator (occupancy grid) restored.

    ``--renderer auto`` resolves again on ``device``, and a ``nerfacc`` run renders with
    ``torch_grid`` where nerfacc cannot run (a CPU): both keep the same grid state. None for a
    grid renderer whose checkpoint holds no grid (then ``render_rays_image`` reads one off
    the field).
    """
    state = (payload.get("extra") or {}).get("estimator")
    if state is None and cfg.render.renderer != "hierarchical":
        return None
    return build_renderer(cfg.render, device, state=state, fallback=True)


def render_rays_image(
    rays: Rays,
    fields: dict[str, NeRFField],
    cfg: RenderConfig,
    device: torch.device,
    chunk: int | None = None,
    renderer: Renderer | None = None,
    aabb: tuple[float, ...] | None = None,
) -> dict[str, torch.Tensor]:
    """Render whole-image rays (leading shape [H, W]) with the run's renderer, ``chunk`` rays at a time.

    The one code path behind ``render_view`` (evaluation) and ``enerf render`` (videos).

    Args:
        renderer: the run's renderer with its trained estimator (``renderer_from_checkpoint``,
            or the trainer's). None: ``cfg.renderer``; for the grid renderers the grid is
            then read off the field (one density pass over all cells), which renders the
            same scene but costs that pass on every call.
        aabb: the scene's content box (``Scene.aabb``) for a grid read off the field; None:
            the box of ``rays``.

    Returns:
        dict of CPU tensors: rgb [H, W, 3], depth [H, W], acc [H, W] (see ``render_image``).
    """
    for field in fields.values():
        field.eval()
    rays = Rays(*(t.to(device) for t in rays))
    fns = field_fns(fields)
    if renderer is None:
        renderer = build_renderer(cfg, device, rays=rays, aabb=aabb, read_off=fns)
    return renderer.render_image(rays, fns, chunk)


def render_view(
    scene: Scene,
    index: int,
    fields: dict[str, NeRFField],
    cfg: RenderConfig,
    device: torch.device,
    renderer: Renderer | None = None,
) -> np.ndarray:
    """Render view ``index`` of ``scene`` (see ``render_rays_image``); returns rgb [H, W, 3] float32 in [0, 1]."""
    out = render_rays_image(scene.rays(index, device=device), fields, cfg, device, renderer=renderer, aabb=scene.aabb)
    return out["rgb"].clamp(0.0, 1.0).cpu().numpy()


def evaluate_views(
    scene: Scene,
    views: Sequence[int],
    fields: dict[str, NeRFField],
    cfg: RenderConfig,
    device: torch.device,
    lpips_metric=None,
    image_dir: Path | None = None,
    renderer: Renderer | None = None,
) -> list[dict]:
    """Per-view metrics; optionally saves each rendering as ``image_dir/view_NNN.png``.

    ``renderer``: the run's renderer with its estimator (see ``render_rays_image``).
    """
    per_image = []
    for index in views:
        pred = render_view(scene, int(index), fields, cfg, device, renderer=renderer)
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
    """Write metrics.json atomically; always valid JSON (a NaN or inf value is written as null)."""
    atomic_write_json(path, metrics)


def read_metrics(path: Path) -> dict:
    """A run's metrics.json as a dict ({} when absent); ConfigError when it is not a JSON object."""
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid JSON ({str(exc).splitlines()[0]}); move it away or delete it, "
                          "then run again") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path} holds a JSON {type(value).__name__}, not a metrics object; move it away or delete it")
    return value


def load_field_weights(fields: dict[str, NeRFField], models: dict, ckpt_path: str | Path) -> None:
    """Load ``models[name]`` into each field; CheckpointError (one line) when the weights do not
    fit the network the checkpoint's config describes."""
    for name, field in fields.items():
        if name not in models:
            raise CheckpointError(f"{ckpt_path}: no weights for the '{name}' field")
        try:
            field.load_state_dict(models[name])
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CheckpointError(f"{ckpt_path}: weights of '{name}' do not fit its config ({first})") from None


def evaluate_checkpoint(ckpt_path: str | Path, data_root: Path, device_name: str | None = None) -> dict:
    """Recompute metrics.json for a run from its checkpoint alone (``enerf eval``)."""
    payload, cfg = load_checkpoint(ckpt_path)
    if not isinstance(cfg, RunConfig):
        raise CheckpointError(f"{ckpt_path} is a shape checkpoint; evaluate it with: enerf shape eval --ckpt {ckpt_path}")
    device = select_device(device_name or cfg.train.device)
    scene = load_scene(cfg.data, data_root, cfg.render.white_bkgd)
    fields = build_fields(cfg.field, with_fine="fine" in payload["models"], device=device)
    load_field_weights(fields, payload["models"], ckpt_path)
    renderer = renderer_from_checkpoint(payload, cfg, device)
    ckpt_path = Path(ckpt_path)
    # A checkpoint lives in <run>/checkpoints/; results go beside it, wherever the run was moved.
    out_dir = ckpt_path.resolve().parent.parent if ckpt_path.parent.name == "checkpoints" else run_dir(cfg)
    check_output_dir(out_dir, "--ckpt's run folder")
    metrics_path = out_dir / "metrics.json"
    previous = read_metrics(metrics_path)
    lpips_metric, lpips_error = make_lpips(device) if cfg.train.compute_lpips else (None, "disabled by config")
    with RunLock(out_dir, "enerf eval"):  # training writes metrics.json too: one writer at a time
        per_image = evaluate_views(scene, scene.i_test, fields, cfg.render, device, lpips_metric,
                                   image_dir=out_dir / "test_views", renderer=renderer)
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
