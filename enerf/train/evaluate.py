"""Held-out evaluation: render test views, score PSNR / SSIM / LPIPS, and the record metrics.json keeps of
them (``metrics_record``). Scoring a checkpoint (``enerf eval``) is ``enerf.train.eval_run``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import imageio.v3 as iio
import numpy as np
import torch

from ..atomic import atomic_write_bytes
from ..cameras.visibility import seen_pixels
from ..config import RenderConfig
from ..data.scene import Scene
from ..fields.appearance import APPEARANCE_PROTOCOL, right_half_psnr
from ..fields.nerf import NeRFField
from ..metrics import LPIPS_MIN_SIZE, SSIM_WINDOW, image_metrics, mse_to_psnr
from ..progress import progress_bar, stderr_is_terminal
from .estimate import duration_text
from ..render import Renderer
from ..render.sources import ImageSource, field_source

__all__ = ["render_scene_view", "evaluate_views", "seen_scores", "uncovered", "UNCOVERED_ACC", "ViewReport", "summarize",
           "metrics_record"]

UNCOVERED_ACC = 0.5  # a pixel under this accumulated opacity counts as uncovered (``uncovered``)


def render_scene_view(scene: Scene, index: int, fields: dict[str, NeRFField], cfg: RenderConfig, device: torch.device,
                      renderer: Renderer | None = None, bar=None, stride: int = 1) -> np.ndarray:
    """Render view ``index`` of ``scene`` (``enerf.render.images.render_rays_image``); returns rgb
    [H, W, 3] float32 in [0, 1], or with ``stride`` s > 1 every s-th row and column of it (``Scene.rays``)."""
    out = field_source(scene, fields, cfg, device, renderer)(scene.camera(index, stride), bar)
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
    progress: bool = True,
    desc: str = "held-out views",
    leave: bool = True,
    stride: int = 1,
    report: bool = False,
    source: ImageSource | None = None,
) -> list[dict]:
    """Per-view metrics (``image_metrics``, and ``psnr_fit_right``: NeRF-W's protocol,
    ``enerf.fields.appearance``); optionally saves each rendering as ``image_dir/view_NNN.png``.

    ``stride``: s > 1 renders and scores every s-th row and column of each view only (s² times
    fewer rays; PSNR is then the mean over that regular subset of the pixels, SSIM and LPIPS are
    those of the smaller image).
    ``renderer``: the run's renderer with its estimator (see ``render_rays_image``).
    ``progress``: a bar (``enerf.progress``; on a terminal) counting the rays of all views,
    advanced after every chunk, its postfix the view being rendered; ``leave=False`` clears it
    when done (periodic evaluations, under the training bar).
    ``report``: where no bar is shown (stderr not a terminal: a log file), one line on stdout
    before the first view and one after each (``ViewReport``): its PSNR and the time left.
    ``source``: where the images come from (``enerf.render.sources``; baked splats:
    ``enerf.splats.source``); None: ``fields`` with ``renderer`` (``field_source``).
    Each view's ``uncovered``: the share of its pixels under half opacity (``uncovered``).
    """
    source = source or field_source(scene, fields, cfg, device, renderer)
    per_image = []
    rows, cols = -(-scene.height // stride), -(-scene.width // stride)
    lines = ViewReport(desc, len(views), cols, rows) if report and not stderr_is_terminal() else None
    with progress_bar(len(views) * rows * cols, desc, progress, unit="ray", leave=leave) as bar:
        for k, index in enumerate(views):
            bar.set_postfix_str(f"view {k + 1}/{len(views)}", refresh=False)
            out = source(scene.camera(int(index), stride), bar)
            pred = out["rgb"].clamp(0.0, 1.0).cpu().numpy()
            target = scene.image(int(index), stride)
            scores = {**image_metrics(pred, target, lpips_metric), "psnr_fit_right": right_half_psnr(pred, target),
                      **seen_scores(scene, int(index), stride, out, pred, target), "uncovered": uncovered(out)}
            per_image.append({"view": int(index), **scores})
            if lines is not None:
                lines.view_done(k + 1, scores["psnr"])
            if image_dir is not None:
                png = iio.imwrite("<bytes>", (pred * 255 + 0.5).astype(np.uint8), extension=".png")
                atomic_write_bytes(image_dir / f"view_{int(index):03d}.png", png)
    return per_image


def uncovered(out: dict) -> float | None:
    """The share of a rendering's pixels whose accumulated opacity is under ``UNCOVERED_ACC`` (where the
    background shows through: a hole); None when the source gives no opacity. out: acc Tensor  # [h, w]"""
    return float((out["acc"] < UNCOVERED_ACC).float().mean()) if "acc" in out else None


def seen_scores(scene: Scene, index: int, stride: int, out: dict, pred: np.ndarray, target: np.ndarray) -> dict:
    """``psnr_seen``: the PSNR of view ``index`` over the pixels whose rendered surface at least one training
    camera has in its frustum (``enerf.cameras.visibility.seen_pixels``; the surface: the point at the
    rendering's median depth, or its mean depth where the source gives no median), and ``seen_fraction``:
    the share of such pixels. Both None for NDC scenes, sources without depth, or no seen pixel.

    Args:
        out: the source's rendering (``depth_median`` or ``depth`` and ``acc``: Tensor  # [h, w])
        pred, target: np.ndarray  # [h, w, 3], the view's pixels at ``stride``
    """
    if "depth_median" in out:
        depth = out["depth_median"]
    elif "depth" in out and "acc" in out:
        depth = out["depth"] / out["acc"].clamp_min(1e-6)
    else:
        depth = None
    if scene.use_ndc or depth is None or len(scene.i_train) == 0:
        return {"psnr_seen": None, "seen_fraction": None}
    rays = scene.rays(index, "cpu", stride)
    seen = seen_pixels(rays.origins, rays.directions, depth.float().cpu(), torch.as_tensor(scene.poses[scene.i_train]),
                       scene.height, scene.width, scene.focal)
    psnr = mse_to_psnr(np.mean((pred[seen] - target[seen]) ** 2)) if seen.any() else None
    return {"psnr_seen": psnr, "seen_fraction": float(seen.mean())}


class ViewReport:
    """Progress of an evaluation as lines (for log files): one when it starts, one per view with
    its PSNR and the time left (the mean time per view so far times the views left)."""

    def __init__(self, desc: str, n_views: int, width: int, height: int, say=None) -> None:
        self.desc, self.n_views = desc, n_views
        self.say = say or (lambda line: print(line, flush=True))
        self.tic = time.perf_counter()
        self.say(f"{desc}: rendering {n_views} view{'' if n_views == 1 else 's'} of {width} x {height}")

    def view_done(self, done: int, psnr: float) -> None:
        """After the ``done``-th view (1-based), scored ``psnr`` dB."""
        elapsed = time.perf_counter() - self.tic
        left = elapsed / done * (self.n_views - done)
        tail = f", about {duration_text(left)} left" if done < self.n_views else f", {duration_text(elapsed)} in all"
        self.say(f"{self.desc}: view {done}/{self.n_views} scored {psnr:.2f} dB{tail}")


def summarize(per_image: list[dict], lpips_error: str | None) -> dict:
    """Means over views; ``lpips`` is None (with ``lpips_error``) when it could not be computed."""
    summary = {
        "psnr": float(np.mean([p["psnr"] for p in per_image])),
        "psnr_fit_right": float(np.mean([p["psnr_fit_right"] for p in per_image])),
        "psnr_seen": _mean_of(per_image, "psnr_seen"),  # over the views that have one
        "seen_fraction": _mean_of(per_image, "seen_fraction"),
        "uncovered_max": max((p["uncovered"] for p in per_image if p.get("uncovered") is not None), default=None),
        "ssim": float(np.mean([p["ssim"] for p in per_image])),
        "ssim_window": SSIM_WINDOW,
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


def _mean_of(per_image: list[dict], key: str) -> float | None:
    values = [p[key] for p in per_image if p.get(key) is not None]
    return float(np.mean(values)) if values else None


def metrics_record(cfg, per_image: list[dict], lpips_error: str | None, steps: int, stride: int, checkpoint: str | Path,
                   *, summary: dict | None = None, **extra) -> dict:
    """What metrics.json holds of one evaluation, in one place for training's final evaluation and ``enerf eval``:
    the means over views (``summary``: ``summarize(per_image, lpips_error)``, computed here when None),
    ``per_image``, the steps trained, the stride scored, how views are scored (``appearance``), the conditioning
    and the checkpoint; then ``extra``'s keys, in their order. ``cfg``: the run's ``RunConfig``."""
    return {
        **(summary if summary is not None else summarize(per_image, lpips_error)),
        "per_image": per_image,
        "steps": steps,
        "eval_stride": stride,  # cfg.train.eval_stride, or larger for a short run (enerf.train.short_run)
        "appearance": {"model": cfg.train.appearance, **APPEARANCE_PROTOCOL},  # how held-out views are scored
        "conditioning": cfg.field.conditioning,
        "conditioned_layers": cfg.field.conditioned_layers,
        "checkpoint": str(checkpoint),
        **extra,
    }
