"""Gaussian splats as the browser draws them (viser's ``add_gaussian_splats``). Numpy and torch
only; no viser here (``splat_layer.py`` sends them).

viser takes each Gaussian's centre, its 3 x 3 covariance ``R S S^T R^T`` (``R`` from the w-x-y-z
quaternion, ``S = diag(exp(log_scales))``), an RGB colour in [0, 1] (SH band 0 only:
``SH_C0 * f_dc + 0.5``, clamped; the browser draws no view-dependent colour) and the opacity
(``sigmoid`` of its logit). It sends the covariance as float16, whose normal range starts at
6e-5 (spacing 6e-8 below it): a scene-frame splat of standard deviation 0.001 (variance 1e-6)
would keep about one digit. So the splats are
sent divided by a power of two ``node_scale`` (their median size then about 1) and the scene
node scales them back (exact in floating point).

Frames: the viewer draws a run in its scene frame (``scene.py``). A splat file in the capture's
frame (``world``, what ``enerf export splats`` writes by default; a file that names no frame, as
other tools write them, is taken as ``world``) is brought there by the inverse of
``Scene.scene_to_world``; a ``scene`` file is already there. Without a run the splats are shown
in their own frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import ConfigError, DataError
from ..runfolder import RUN_SPLATS
from ..splats.gaussians import Splats

__all__ = ["ViewerSplats", "viewer_splats", "read_viewer_splats", "node_scale", "default_splats_file", "bake_hint"]

_F16_MAX = 6.0e4  # below float16's largest finite value (65504)


@dataclass(frozen=True, eq=False)
class ViewerSplats:
    """N Gaussians as viser draws them, in the viewer's frame."""

    centers: np.ndarray  # [N, 3] float32
    covariances: np.ndarray  # [N, 3, 3] float32, symmetric positive semi-definite
    rgbs: np.ndarray  # [N, 3] float32 in [0, 1]
    opacities: np.ndarray  # [N, 1] float32 in (0, 1)
    source: str = ""  # the file they came from
    frame: str = ""  # how its frame was taken, e.g. "world -> scene"

    def __len__(self) -> int:
        return int(self.centers.shape[0])

    def describe(self) -> str:
        """One line for the panel: ``12,345 splats from F.ply (world -> scene)``."""
        where = f" from {self.source}" if self.source else ""
        return f"{len(self):,} splats{where}" + (f" ({self.frame})" if self.frame else "")


def viewer_splats(splats: Splats, source: str = "", frame: str = "") -> ViewerSplats:
    """``splats`` (any device) -> the arrays viser draws (float32 numpy)."""
    s = splats.map(lambda t: t.detach().to("cpu", torch.float64))
    return ViewerSplats(s.means.float().numpy(), s.covariances().float().numpy(), s.base_rgb().float().numpy(),
                        s.opacities.float().numpy()[:, None], source, frame)


def node_scale(covariances: np.ndarray) -> float:
    """The power of two the splats are divided by before viser's float16 covariances: about the
    median standard deviation (along each splat's widest axis). ``covariances``: [N, 3, 3]."""
    if len(covariances) == 0:
        return 1.0
    widest = np.max(np.diagonal(covariances, axis1=1, axis2=2), axis=1)  # [N] largest axis variance (about)
    std = math.sqrt(max(float(np.median(widest)), 1e-30))
    return float(2.0 ** round(math.log2(std)))


def scaled_for_viser(splats: ViewerSplats) -> tuple[np.ndarray, np.ndarray, float]:
    """(centres [N, 3], covariances [N, 3, 3], scale): what ``add_gaussian_splats`` gets, the
    covariances within float16's range (a splat larger than that is shrunk to its largest)."""
    scale = node_scale(splats.covariances)
    cov = splats.covariances.astype(np.float64) / scale**2
    peak = np.abs(cov).reshape(len(cov), -1).max(axis=1) if len(cov) else np.zeros(0)
    cov *= np.minimum(1.0, _F16_MAX / np.maximum(peak, 1e-30))[:, None, None]
    return (splats.centers / np.float32(scale)).astype(np.float32), cov.astype(np.float32), scale


def read_viewer_splats(path: str | Path, scene=None) -> ViewerSplats:
    """Read a splat file (.ply, .spz, .splat) for the viewer; with a run's ``scene`` (``Scene``), in its
    normalised frame (``enerf.splats.files.read_splats_into_scene``: a ``world`` file, or one that names no
    frame, is moved there). A missing file is a ConfigError, an unreadable or empty one a DataError (one line)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--splats {path}: no such file (write one with enerf export splats --ckpt C --out {path})")
    from ..splats.files import read_splats_into_scene  # the splat file's modules (imported where used)

    splats, frame = read_splats_into_scene(path, scene)
    if len(splats) == 0:
        raise DataError(f"--splats {path}: the file holds no splats")
    if scene is None:
        how = f"{frame} frame" if frame else "its own frame"
    else:
        how = {"scene": "scene frame", "world": "world -> scene"}.get(frame, "taken as world -> scene")
    return viewer_splats(splats, str(path), how)


def default_splats_file(run_folder: str | Path) -> Path:
    """Where ``enerf view --ckpt C`` looks for the run's splats: ``<run>/splats.ply``
    (``enerf.runfolder.run_splats_path``)."""
    return Path(run_folder) / RUN_SPLATS


def bake_hint(ckpt: str | Path, run_folder: str | Path) -> str:
    """The line that says how to make the splats ``enerf view`` draws while the camera moves."""
    return f"no splats: enerf export splats --ckpt {ckpt} --out {default_splats_file(run_folder)}"
