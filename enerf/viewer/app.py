"""``enerf view``: load one or two checkpoints, and / or a splat file, and serve them in the browser."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from ..config import DATA_ROOT, ViewerConfig
from ..errors import ConfigError
from ..loaded_run import LoadedRun, load_run
from ..runfolder import choose_splats
from ..runfolder import read_metrics
from .server import Viewer
from .splats import bake_hint, read_viewer_splats
from .session import import_viser

__all__ = ["open_view", "check_same_scene"]


def check_same_scene(a: LoadedRun, b: LoadedRun) -> None:
    """ConfigError (one line) unless runs ``a`` and ``b`` were trained on one scene: the same image
    size, views, held-out split and poses."""
    sa, sb = a.scene, b.scene
    same = (sa.width, sa.height, sa.n_views, sa.use_ndc) == (sb.width, sb.height, sb.n_views, sb.use_ndc) \
        and np.array_equal(sa.i_test, sb.i_test) and np.allclose(sa.poses, sb.poses, atol=1e-5)
    if not same:
        raise ConfigError(f"--ckpt {a.ckpt_path} ({sa.name}, {sa.width}x{sa.height}, {sa.n_views} views) and --ckpt "
                          f"{b.ckpt_path} ({sb.name}, {sb.width}x{sb.height}, {sb.n_views} views) were trained on "
                          "different scenes (or splits); one view shows two runs of one scene")


def open_view(ckpts: list[str | Path], cfg: ViewerConfig, data_root: Path = DATA_ROOT,
              device_name: str | None = None, worker: bool = True, datadir: str | Path | None = None,
              splats: str | Path | None = None, field: bool = False,
              announce: Callable[[str], None] | None = None) -> Viewer:
    """Serve ``ckpts`` (one, or two of one scene) and / or ``splats`` (a 3DGS PLY) at
    ``cfg.host:cfg.port``; returns the running Viewer (``close()`` it; ``viewer.splat_layer.note``
    says when a run has no splats); ``datadir``: the scene folder instead of the recorded one;
    ``announce`` gets one line saying what is drawn (before the server starts rendering).

    Splats: ``splats`` alone are shown in their own frame, nothing rendered on the server; with
    one run, ``splats`` (else ``<run>/splats.ply`` when it exists, unless ``field``:
    ``enerf.runfolder.choose_splats``) in the run's scene frame, drawn by the browser while the
    camera moves (``splat_layer.py``); two runs have none. The port is checked before anything
    loads; nothing is written but the camera paths the panel saves (into ``<first run>/camera_paths/``)."""
    if not ckpts and splats is None:
        raise ConfigError("enerf view needs --ckpt (a trained run) or --splats (a 3DGS .ply), or both")
    if len(ckpts) > 2:
        raise ConfigError(f"enerf view shows one or two checkpoints, got {len(ckpts)} --ckpt")
    if len(ckpts) == 2 and splats is not None:
        raise ConfigError("--splats goes with one --ckpt (or none); the two-run view draws no splats")
    if field and not ckpts:
        raise ConfigError("--field goes with --ckpt: without a run there is no field to render")
    import_viser()
    viewer = Viewer(cfg, title="enerf view")
    try:
        runs = [load_run(ckpt, data_root, device_name, task="nerf", datadir=datadir, images=False) for ckpt in ckpts]
        if len(runs) == 2:
            check_same_scene(*runs)
        metrics = [read_metrics(run.folder / "metrics.json") for run in runs]
        drawn, note = None, ""
        if len(runs) == 2:
            line = "rendering the two runs' fields (the two-run view draws no splats)"
        else:
            choice = choose_splats(splats, runs[0].folder if runs else None, field)
            line = choice.describe()
            if choice.path is not None:
                drawn = read_viewer_splats(choice.path, runs[0].scene if runs else None)
            elif choice.origin == "none":
                note = bake_hint(runs[0].ckpt_path, runs[0].folder)
        if announce is not None:
            announce(line)
        viewer.attach(runs, metrics, path_dir=runs[0].folder / "camera_paths" if runs else None, splats=drawn,
                      splats_note=note)
    except BaseException:
        viewer.close()
        raise
    if worker and runs:
        viewer.start_worker()
    return viewer
