"""``enerf compare``: run the grid, then write the table and the plots into ``<out>/``.

Outputs: ``compare.md``, ``compare.csv`` (``table.py``), ``<curve>_curves.png``
(``psnr_curves.png`` and ``train_psnr_curves.png`` for NeRF), ``side_by_side.png`` (NeRF
only) and ``conditioning.png`` (when the runs recorded ``kappa_history``); every file is
written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

import imageio.v3 as iio
import numpy as np

from ..atomic import atomic_write_bytes, atomic_write_text
from ..config import DATA_ROOT, CONDITIONING_MODES, CompareConfig, run_config_from_dict
from ..errors import ConfigError
from . import plots
from .grid import GridCell, Runner, plan_grid, run_grid, scene_label, subprocess_runner
from .launchers import make_launcher
from .table import collect, table_rows, to_csv, to_markdown
from .tasks import TaskKind, get_task, parse_mode

__all__ = ["run_compare", "write_report", "view_command"]


def _known_precond() -> tuple[str, ...]:
    from .. import config

    return tuple(getattr(config, "PRECOND_MODES", ()))


def run_compare(cfg: CompareConfig, config_file: list[str] | str | None = None, extra: list[str] | None = None,
                runner: Runner = subprocess_runner, progress: bool = True, data_root: Path = DATA_ROOT) -> dict:
    """Run (or resume) the grid of ``cfg`` and write its report; returns {"outputs": [...], "rows": [...]}.

    ``config_file``: ``--config`` items, a file for every scene and / or ``SCENE=FILE``."""
    task = get_task(cfg.task)
    known = tuple(CONDITIONING_MODES) if task.name == "nerf" else ()
    modes = [parse_mode(m, known, _known_precond(), lr_scales=task.name == "nerf") for m in cfg.modes]
    extra = list(extra or [])
    runs = plan_grid(task, list(cfg.scenes), modes, list(cfg.seeds), Path(cfg.out), config_file, extra)
    launcher = make_launcher(cfg.launcher, runner, cfg.jobs, cfg.address, cfg.run_cpus, cfg.run_gpus)
    run_grid(task, runs, extra, cfg.jobs, runner, progress, launcher)
    return write_report(task, runs, cfg, data_root)


def _cost(runs: list[GridCell], metrics: dict) -> dict[str, dict]:
    cost: dict[str, dict] = {}
    for mode in dict.fromkeys(r.mode.spec for r in runs):
        mine = [r for r in runs if r.mode.spec == mode]
        train = [metrics[(r.scene, mode, r.seed)].get("train_seconds") for r in mine]
        wall = [r.record.get("wall_seconds") for r in mine]
        rss = [r.record.get("peak_rss_gb") for r in mine]
        cost[mode] = {
            "train_seconds": float(np.mean(train)) if all(v is not None for v in train) else None,
            "wall_seconds": float(np.mean(wall)) if all(v is not None for v in wall) else None,
            "peak_rss_gb": float(max(rss)) if all(v is not None for v in rss) else None,
        }
    return cost


def write_report(task: TaskKind, runs: list[GridCell], cfg: CompareConfig, data_root: Path = DATA_ROOT) -> dict:
    """Write compare.md / compare.csv and the plots from the finished runs' metrics.json."""
    out = Path(cfg.out)
    scenes = list(dict.fromkeys(r.scene for r in runs))
    modes = list(dict.fromkeys(r.mode.spec for r in runs))
    seeds = list(dict.fromkeys(r.seed for r in runs))
    metrics = {(r.scene, r.mode.spec, r.seed): r.metrics() for r in runs}
    labels = [scene_label(s) for s in scenes]
    by_label = {(scene_label(s), m, seed): v for (s, m, seed), v in metrics.items()}
    baseline = cfg.baseline if cfg.baseline in modes else None
    values = collect(task, by_label, labels, modes, seeds)
    rows = table_rows(task, values, labels, modes, seeds, baseline)
    outputs = []

    def write(name: str, data: bytes | str) -> None:
        path = out / name
        (atomic_write_text if isinstance(data, str) else atomic_write_bytes)(path, data)
        outputs.append(path)

    write("compare.csv", to_csv(task, rows, baseline))
    write("compare.md", to_markdown(task, rows, labels, modes, seeds, baseline, _cost(runs, metrics),
                                    title=f"enerf compare: {task.name}"))

    curves = {scene_label(s): {m: [metrics[(s, m, seed)].get("history", []) for seed in seeds] for m in modes}
              for s in scenes}
    for key, label in task.curves:
        write(f"{key}_curves.png", plots.figure_png(plots.curves_figure(curves, key, label)))

    if task.images:
        write("side_by_side.png", plots.figure_png(plots.side_by_side_figure(
            [_side_by_side_row(s, modes, seeds[0], runs, metrics, data_root) for s in scenes])))

    kappas = {m: metrics[(scenes[0], m, seeds[0])].get("kappa_history") or [] for m in modes}
    if any(kappas.values()):
        write("conditioning.png", plots.figure_png(plots.conditioning_figure({m: k for m, k in kappas.items() if k})))
    return {"outputs": outputs, "rows": rows, "runs": runs,
            "view": view_command(runs, metrics) if task.name == "nerf" else None}


def view_command(runs: list[GridCell], metrics: dict) -> str | None:
    """``enerf view`` of the first scene's best vanilla run (conditioning none) beside its best
    conditioned run, by held-out PSNR; None without one of each (or without their checkpoints).

    ``metrics``: (scene, mode spec, seed) -> the run's metrics.json."""
    scene = runs[0].scene if runs else None
    best: dict[bool, tuple[float, GridCell]] = {}
    for run in runs:
        psnr = (metrics.get((run.scene, run.mode.spec, run.seed)) or {}).get("psnr")
        ckpt = run.config_run_folder / "checkpoints" / "latest.pt"
        if run.scene != scene or not isinstance(psnr, (int, float)) or not ckpt.is_file():
            continue
        conditioned = run.mode.conditioning != "none" or run.mode.precond not in ("", "none")
        if conditioned not in best or psnr > best[conditioned][0]:
            best[conditioned] = (float(psnr), run)
    if len(best) < 2:
        return None
    vanilla, conditioned = best[False][1], best[True][1]
    return (f"enerf view --ckpt {vanilla.config_run_folder / 'checkpoints' / 'latest.pt'} "
            f"--ckpt {conditioned.config_run_folder / 'checkpoints' / 'latest.pt'}")


def _side_by_side_row(scene: str, modes: list[str], seed: int, runs: list[GridCell], metrics: dict,
                      data_root: Path) -> dict:
    """Ground truth and every mode's rendering of the first held-out view (seed ``seed``)."""
    from ..data.loaders import load_scene

    grid = {(r.scene, r.mode.spec, r.seed): r for r in runs}
    first = metrics[(scene, modes[0], seed)]
    if not first.get("per_image"):
        raise ConfigError(f"{grid[(scene, modes[0], seed)].metrics_path}: no per_image entries to show")
    view = int(first["per_image"][0]["view"])
    run_cfg = run_config_from_dict(json.loads((grid[(scene, modes[0], seed)].config_run_folder / "config.json").read_text()))
    # the pixels the runs scored: every eval_stride-th row and column (metrics.json's: a short run's may be larger)
    stride = int(first.get("eval_stride") or run_cfg.train.eval_stride)
    gt = load_scene(run_cfg.data, data_root, run_cfg.render.white_bkgd).image(view, stride)
    preds = {}
    for mode in modes:
        run = grid[(scene, mode, seed)]
        psnr = next(p["psnr"] for p in metrics[(scene, mode, seed)]["per_image"] if int(p["view"]) == view)
        preds[mode] = (_rendering(run, view, data_root, stride), float(psnr))
    return {"scene": scene_label(scene), "view": view, "gt": gt, "preds": preds}


def _rendering(run: GridCell, view: int, data_root: Path, stride: int) -> np.ndarray:
    """The run's saved held-out rendering, or a fresh one from its checkpoint (every ``stride``-th row
    and column)."""
    png = run.config_run_folder / "test_views" / f"view_{view:03d}.png"
    if png.is_file():
        return np.asarray(iio.imread(png), dtype=np.float32)[..., :3] / 255.0
    from ..train.evaluate import render_scene_view
    from ..loaded_run import load_run

    trained = load_run(run.config_run_folder / "checkpoints" / "latest.pt", data_root, task="nerf")
    return render_scene_view(trained.scene, view, trained.fields, trained.cfg.render, trained.device, stride=stride)
