"""Score a trained run's checkpoint on its held-out views (``enerf eval``): the field into metrics.json, or
(``--splats``) a splat file baked from it into metrics_splats.json, each view's rendering beside it."""

from __future__ import annotations

from pathlib import Path

from ..atomic import atomic_write_json
from ..loaded_run import load_run
from ..metrics import make_lpips
from ..runfolder import RunLock, check_output_dir, read_metrics
from ..splats.files import read_splat_file, read_splats_into_scene
from ..splats.source import run_background, splat_source
from .evaluate import evaluate_views, metrics_record

__all__ = ["EVAL_OUTPUTS", "evaluate_checkpoint"]

# what enerf eval writes into the run folder, per image source: (metrics file, folder of the renderings)
EVAL_OUTPUTS = {"field": ("metrics.json", "test_views"), "splats": ("metrics_splats.json", "test_views_splats")}


def evaluate_checkpoint(ckpt_path: str | Path, data_root: Path, device_name: str | None = None,
                        progress: bool = True, datadir: str | Path | None = None,
                        splats: str | Path | None = None) -> dict:
    """Recompute metrics.json for a run from its checkpoint and its scene's images (``enerf eval``;
    ``datadir``: the scene folder instead of the one recorded at training).

    ``splats``: a splat file (.ply, .spz, .splat) to score instead of the field (``enerf eval --splats``; read in the frame
    it declares, ``enerf.splats.source``): the same views and metrics, into ``metrics_splats.json``
    (plus ``splats``: the file, ``source``: ``splats``, ``splat_count``, ``sh_degree``) and
    ``test_views_splats/``; the field's metrics.json is left as it is.
    """
    if splats is not None:
        splat_file = read_splat_file(splats)  # a file that is no splat file: one line before the checkpoint loads
    run = load_run(ckpt_path, data_root, device_name, task="nerf", datadir=datadir, images=True)
    cfg, scene, device, out_dir = run.cfg, run.scene, run.device, run.folder
    check_output_dir(out_dir, "--ckpt's run folder")
    metrics_name, views_name = EVAL_OUTPUTS["field" if splats is None else "splats"]
    metrics_path = out_dir / metrics_name
    previous, source, extra = read_metrics(metrics_path), None, {}
    if splats is not None:
        baked = read_splats_into_scene(splats, scene, device, read=splat_file)[0]
        source = splat_source(baked, scene, background=run_background(cfg.render))
        previous = {}  # nothing of an earlier file is kept: every key is this evaluation's
        extra = {"splats": str(Path(splats).resolve()), "source": "splats", "splat_count": len(baked),
                 "sh_degree": baked.degree}
    lpips_metric, lpips_error = make_lpips(device) if cfg.train.compute_lpips else (None, "disabled by config")
    with RunLock(out_dir, "enerf eval"):  # training writes metrics.json too: one writer at a time
        per_image = evaluate_views(scene, scene.i_test, run.fields, cfg.render, device, lpips_metric,
                                   image_dir=out_dir / views_name, renderer=run.renderer, progress=progress,
                                   stride=cfg.train.eval_stride, source=source)
        metrics = {**previous, **metrics_record(cfg, per_image, lpips_error, run.step, cfg.train.eval_stride,
                                                run.ckpt_path, **extra)}
        metrics.setdefault("train_seconds", run.extra.get("train_seconds"))
        atomic_write_json(metrics_path, metrics)  # a NaN or inf value is written as null
    return metrics
