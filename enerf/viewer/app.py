"""``enerf view``: load one or two checkpoints and serve them in the browser."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import DATA_ROOT, ViewerConfig
from ..errors import ConfigError
from ..loaded_run import LoadedRun, load_run
from ..train.evaluate import read_metrics
from .server import Viewer
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
              device_name: str | None = None, worker: bool = True, datadir: str | Path | None = None) -> Viewer:
    """Serve ``ckpts`` (one, or two of one scene) at ``cfg.host:cfg.port``; returns the running Viewer
    (``close()`` it); ``datadir``: the scene folder instead of the recorded one. The port is checked before the checkpoints load; nothing is written but the
    camera paths the panel saves (into ``<first run>/camera_paths/``)."""
    if not 1 <= len(ckpts) <= 2:
        raise ConfigError(f"enerf view shows one or two checkpoints, got {len(ckpts)} --ckpt")
    import_viser()
    viewer = Viewer(cfg, title="enerf view")
    try:
        runs = [load_run(ckpt, data_root, device_name, task="nerf", datadir=datadir, images=False) for ckpt in ckpts]
        if len(runs) == 2:
            check_same_scene(*runs)
        metrics = [read_metrics(run.folder / "metrics.json") for run in runs]
        viewer.attach(runs, metrics, path_dir=runs[0].folder / "camera_paths")
    except BaseException:
        viewer.close()
        raise
    if worker:
        viewer.start_worker()
    return viewer
