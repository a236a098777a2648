"""Training that ends in splats: after the field's time budget, ``--splat_seconds`` of baking.

When ``train.splat_seconds`` > 0 (the capture presets' default), ``enerf train`` goes on after the
field is trained and scored:

1. **Bake** (``enerf.splats.bake``, ``enerf export splats``' defaults with ``bake_seconds`` =
   ``splat_seconds``): the splats start from the field and are fitted to the photos and to the field's
   views between them; written atomically as a 3DGS PLY, ``<run>/splats.ply`` (``RUN_SPLATS``), in the
   capture's frame (``world``); view, render and export html open it (``enerf.runfolder.run_splats_path``).
2. **Score** the same held-out views from the splats (``enerf.train.evaluate.evaluate_checkpoint``:
   ``<run>/metrics_splats.json``, ``<run>/test_views_splats/``) and add a summary under ``splats`` to
   ``metrics.json``, whose own keys stay the field's.

With ``cap_outputs`` (the default) the bake takes at most as long as the field trained (a run of a few
steps is not followed by minutes of baking), and a line says so. A resumed run whose ``splats.ply`` is
newer than its checkpoint is not baked again, only scored; a bake that was interrupted wrote nothing and
starts over.
"""

from __future__ import annotations

from pathlib import Path

from ..atomic import atomic_write_json
from ..config import DATA_ROOT, RunConfig, SplatConfig
from ..loaded_run import load_run
from ..runfolder import RUN_SPLATS

__all__ = ["bake_seconds", "splats_summary", "splat_stage"]


def splats_summary(scored: dict, bake: dict | None) -> dict:
    """What ``metrics.json`` keeps of the splats: the means of ``scored`` (``metrics_splats.json``), the
    worst view, the share of pixels the splats leave under half opacity, and the bake's figures."""
    per_view = [{"view": p["view"], "psnr": p["psnr"], "uncovered": p.get("uncovered")} for p in scored["per_image"]]
    summary = {k: scored.get(k) for k in ("psnr", "ssim", "lpips", "psnr_fit_right", "splats", "splat_count",
                                          "sh_degree", "uncovered_max")}
    summary["per_view"] = per_view
    if bake is not None:
        report = bake["report"]
        summary["bake"] = {"seconds": bake["seconds"], "bytes": bake["bytes"], "candidates": report.candidates,
                           "init_seconds": report.init_seconds, "fit_seconds": report.fit_seconds,
                           "fit_steps": report.fit_steps, "backend": report.backend}
    return summary


def bake_seconds(cfg: RunConfig, train_seconds: float) -> float:
    """``splat_seconds``, or with ``cap_outputs`` at most ``train_seconds`` (at least 1 s; one line says so)."""
    seconds = cfg.train.splat_seconds
    if cfg.train.cap_outputs and seconds > max(train_seconds, 1.0):
        seconds = max(train_seconds, 1.0)
        print(f"splats: baked for {seconds:.0f} s, as long as the field trained (--splat_seconds "
              f"{cfg.train.splat_seconds:g} with --cap_outputs 0)", flush=True)
    return seconds


def splat_stage(cfg: RunConfig, ckpt_path: Path, metrics: dict, data_root: Path = DATA_ROOT,
                progress: bool = True) -> dict:
    """Steps 1 and 2 of the module docstring for the run that wrote ``ckpt_path``; returns ``metrics``
    with ``splats`` added (also written to ``metrics.json``)."""
    from ..splats.export import export_splats
    from .eval_run import evaluate_checkpoint

    folder = Path(ckpt_path).parent.parent
    out = folder / RUN_SPLATS
    bake = None
    if not (out.is_file() and out.stat().st_mtime >= Path(ckpt_path).stat().st_mtime):
        seconds = bake_seconds(cfg, metrics.get("train_seconds") or 0.0)
        run = load_run(ckpt_path, data_root, cfg.train.device, task="nerf", images=True)
        bake = export_splats(run, out, SplatConfig(bake_seconds=seconds), progress=progress)
        print(f"splats: {bake['count']:,} Gaussians baked in {bake['seconds']:.0f} s -> {out}", flush=True)
    scored = evaluate_checkpoint(ckpt_path, data_root, cfg.train.device, progress=progress, splats=out)
    metrics = {**metrics, "splats": splats_summary(scored, bake)}
    atomic_write_json(folder / "metrics.json", metrics)
    return metrics
