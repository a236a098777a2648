"""The field as a teacher for the bake: cameras the capture does not have, the field's renderings from them
(``teacher_targets``, ``turned_targets``), and the fit's loss.

The photos pin the splats down only where a photo looks; between the photos, and nearer to or farther
from the scene than any of them, the splats are free to break (a Gaussian that fits two neighbouring
photos can be a streak in the view between them). The field interpolates smoothly there, so the bake
also fits the splats to the field's renderings from new cameras (``teacher_poses``):

* half of them **between** two neighbouring training cameras: the centre interpolated linearly at a
  random fraction in [0.25, 0.75], the rotation spherically (slerp);
* half of them a training camera **pushed in or out** along its viewing axis by up to ``push`` times
  its distance to what it looks at (its median depth);
* ``teacher_turn`` degrees (``turned_poses``, ``turned_targets``; 0: none), every rendered training camera
  also **turned** about its centre, up, down, left and right by that angle: a view that looks past the photos'
  edges sees what no photo frames, where the training views start no Gaussian and the splats would leave
  a hole; the field draws something plausible there, and those pixels start Gaussians too. Off the
  photos a field can also draw fog; with ``turn_spread`` > 0 a turned view teaches, and starts Gaussians,
  only where the field draws a surface (``surface_mask``: its ray's weight gathered at one depth), and
  elsewhere leaves the splats to the photos (``taught_target``).

``fit_loss`` is 3DGS's photometric loss, (1 - λ) L1 + λ (1 - SSIM), with SSIM's 11 x 11 Gaussian window
(σ 1.5) over the valid part of the image, as ``enerf.metrics.ssim`` (scikit-image) computes it for scoring.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from scipy.spatial.transform import Rotation, Slerp
from torch import Tensor

from ..cameras.pinhole import Pinhole
from ..cameras.visibility import frustum_counts
from ..config import SplatConfig
from ..data.camera_paths import Cameras, select_cameras
from ..loaded_run import LoadedRun
from ..views import render_views

__all__ = ["teacher_poses", "turned_poses", "teacher_targets", "turned_targets", "surface_mask", "taught_target",
           "view_candidates", "ssim_map", "fit_loss", "SSIM_RADIUS", "SSIM_SIGMA"]

SSIM_RADIUS = 5  # an 11 x 11 window (scikit-image's with sigma 1.5 and truncate 3.5)
SSIM_SIGMA = 1.5
_C1, _C2 = 0.01 ** 2, 0.03 ** 2  # (K1 L)², (K2 L)² for data range L = 1
SURFACE_ACC = 0.5  # with turn_spread, a turned view's pixel is a surface only where the field is at least this opaque


def teacher_poses(poses: np.ndarray, depths: np.ndarray, count: int, push: float, seed: int = 0) -> np.ndarray:
    """``count`` new cameras near the capture's (module docstring).

    Args:
        poses: [V, 3, 4] camera-to-world of the training cameras (OpenGL axes: column 2 points back,
            away from what the camera looks at), V >= 2
        depths: [V] each camera's median depth (> 0) along its viewing axis
        push: the largest move along the axis, relative to the depth
    Returns:
        [count, 3, 4] float32 camera-to-world, unit rotation columns
    """
    poses = np.asarray(poses, np.float64)
    rng = np.random.default_rng(seed)
    centres = poses[:, :3, 3]
    dist = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
    np.fill_diagonal(dist, np.inf)
    nearest = dist.argmin(1)
    rot = poses[:, :3, :3] / np.linalg.norm(poses[:, :3, :3], axis=1, keepdims=True)
    out = np.zeros((count, 3, 4))
    for k in range(count):
        i = int(rng.integers(len(poses)))
        if k % 2 == 0:  # between camera i and its nearest neighbour
            j, t = int(nearest[i]), float(rng.uniform(0.25, 0.75))
            out[k, :3, :3] = Slerp([0.0, 1.0], Rotation.from_matrix(rot[[i, j]]))([t]).as_matrix()[0]
            out[k, :3, 3] = (1.0 - t) * centres[i] + t * centres[j]
        else:  # camera i moved along its axis (back: + column 2)
            out[k, :3, :3] = rot[i]
            out[k, :3, 3] = centres[i] + rot[i][:, 2] * float(rng.uniform(-push, push)) * float(depths[i])
    return out.astype(np.float32)


def turned_poses(poses: np.ndarray, degrees: float) -> np.ndarray:
    """Each camera turned about its own centre by ``degrees``: up, down, left, right (about its x axis, then its
    y axis; OpenGL axes, so turning about +x by a positive angle tilts the view up).

    Args:
        poses: [V, 3, 4] camera-to-world
    Returns:
        [4 V, 3, 4] float32: camera i's four turns at rows 4 i .. 4 i + 3 (up, down, left, right)
    """
    poses = np.asarray(poses, np.float64)
    t = np.radians(degrees)
    c, s = np.cos(t), np.sin(t)
    turns = np.array([[[1, 0, 0], [0, c, -s], [0, s, c]], [[1, 0, 0], [0, c, s], [0, -s, c]],  # about x: up, down
                      [[c, 0, s], [0, 1, 0], [-s, 0, c]], [[c, 0, -s], [0, 1, 0], [s, 0, c]]])  # about y: left, right
    out = np.repeat(poses, 4, axis=0)
    out[:, :3, :3] = np.einsum("vij,tjk->vtik", poses[:, :3, :3], turns).reshape(-1, 3, 3)
    return out.astype(np.float32)


def teacher_targets(run: LoadedRun, cfg: SplatConfig, rendered: tuple[np.ndarray, np.ndarray], progress: bool = True
                    ) -> tuple[list[Pinhole], list[Tensor]]:
    """The field rendered from ``cfg.teacher_views`` new cameras (``enerf.splats.teacher``) at
    1 / ``init_downscale``: (their Pinholes, the renderings [h, w, 4] float32: the colour composited
    onto black, then the accumulated opacity); none with fewer than two rendered cameras or
    ``teacher_views`` 0."""

    poses, depths = rendered
    if cfg.teacher_views <= 0 or len(poses) < 2:
        return [], []
    cams = _teacher_cameras(run, cfg, teacher_poses(poses, depths, cfg.teacher_views, cfg.teacher_push, cfg.seed),
                            "teacher")
    targets = [_rgba(v) for v in render_views(run, cams, normals=False, progress=progress, depth="median",
                                              desc="splats: render the field's views between the photos")]
    return cams.pinholes(), targets


def _teacher_cameras(run: LoadedRun, cfg: SplatConfig, poses: np.ndarray, prefix: str) -> Cameras:
    """Cameras at ``poses`` [M, 3, 4] of the training views' size at 1 / ``init_downscale``."""
    size = select_cameras(run.scene, "train", 1, cfg.init_downscale).size
    return Cameras(poses, [f"{prefix}_{k:03d}" for k in range(len(poses))], size, cfg.init_downscale)


def _rgba(view) -> Tensor:
    """A rendered view as a teacher target [h, w, 4] float32: the colour composited onto black, then the
    accumulated opacity."""
    return torch.as_tensor(np.concatenate([view.rgb, view.acc[..., None]], -1), dtype=torch.float32).clamp(0.0, 1.0)


def turned_targets(run: LoadedRun, cfg: SplatConfig, rendered: tuple[np.ndarray, np.ndarray], progress: bool = True
                   ) -> tuple[list[Pinhole], list[Tensor], dict[str, np.ndarray]]:
    """With ``cfg.teacher_turn`` > 0: the field rendered from every rendered training camera turned up, down,
    left and right by that many degrees (``turned_poses``), at 1 / ``init_downscale``: (their Pinholes, the
    renderings [h, w, 4] as ``teacher_targets``'s, and as ``field_candidates``' dict the candidates of their
    pixels whose point lies in no training camera's frustum (``enerf.cameras.visibility.frustum_counts``): where
    the photos start none); with ``cfg.turn_spread`` > 0 the renderings carry a fifth channel, 1 where the
    field draws a surface (``surface_mask``), the only pixels taught and the only ones that start Gaussians;
    nothing with ``teacher_turn`` 0."""
    if cfg.teacher_turn <= 0:
        return [], [], {}
    cams = _teacher_cameras(run, cfg, turned_poses(rendered[0], cfg.teacher_turn), "turned")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("points", "rgb", "normals", "footprint", "acc")}
    targets = []
    for view in render_views(run, cams, normals=True, progress=progress, desc="splats: render the field's turned "
                             "views", depth="median"):
        if cfg.turn_spread > 0:
            surface = surface_mask(view, cfg.turn_spread)
            view_candidates(parts, view, cfg, surface)
            targets.append(torch.cat([_rgba(view), torch.as_tensor(surface, dtype=torch.float32)[..., None]], -1))
        else:
            view_candidates(parts, view, cfg)
            targets.append(_rgba(view))
    more = {k: np.concatenate(v) for k, v in parts.items()}
    scene = run.scene
    poses = torch.as_tensor(np.asarray(scene.poses)[scene.i_train][:, :3, :4], dtype=torch.float32)
    unseen = (frustum_counts(torch.as_tensor(more["points"]), poses, scene.height, scene.width, scene.focal) == 0).numpy()
    return cams.pinholes(), targets, {k: v[unseen] for k, v in more.items()}


def surface_mask(view, spread: float) -> np.ndarray:
    """[h, w] bool: where a rendered view's field draws a surface, not fog: at least ``SURFACE_ACC`` opaque,
    its expected termination depth within ``spread`` (relative) of its median one (``ViewDepth.spread``)."""
    return view.hit & (view.acc >= SURFACE_ACC) & (view.spread <= spread)


def taught_target(field: Tensor, bg: Tensor, pred: Tensor) -> Tensor:
    """What the fit compares a teacher view's rendering with: the field's colour composited onto ``bg``; where a
    fifth channel is 0 (``turned_targets``: fog), the splats' own rendering, detached, so the loss teaches
    nothing there.

    Args:
        field: Tensor  # [h, w, 4] colour on black and accumulated opacity, or [h, w, 5] with the taught mask
        bg: Tensor  # [3] the background; pred: Tensor  # [h, w, 3] the splats' rendering of the same view
    Returns:
        Tensor  # [h, w, 3]
    """
    target = field[..., :3] + (1.0 - field[..., 3:4]) * bg
    return target if field.shape[-1] == 4 else torch.where(field[..., 4:] > 0, target, pred.detach())


def view_candidates(parts: dict[str, list[np.ndarray]], view, cfg: SplatConfig, mask: np.ndarray | None = None
                    ) -> np.ndarray:
    """Append one rendered view's candidates (its pixels that hit with accumulated opacity at least
    ``init_min_acc``, and in ``mask`` [h, w] where given) to ``parts``; returns the kept-pixel mask [h, w]."""
    keep = view.hit & (view.acc >= cfg.init_min_acc)
    if mask is not None:
        keep &= mask
    parts["points"].append(view.points[keep].astype(np.float32))
    parts["rgb"].append(view.rgb[keep])
    parts["normals"].append(view.normals[keep])
    parts["footprint"].append(view.z_depth[keep] / (view.focal * cfg.init_downscale))
    parts["acc"].append(view.acc[keep].astype(np.float32))
    return keep


def _window(device, dtype) -> Tensor:
    """[2 * SSIM_RADIUS + 1] the normalised 1D Gaussian window."""
    x = torch.arange(-SSIM_RADIUS, SSIM_RADIUS + 1, device=device, dtype=dtype)
    w = torch.exp(-0.5 * (x / SSIM_SIGMA) ** 2)
    return w / w.sum()


def _blur(x: Tensor) -> Tensor:
    """[C, H, W] -> [C, H - 10, W - 10]: the separable Gaussian window over the valid part (two depthwise
    1D convolutions: on a CPU, forward and backward, less than half the time of a banded matrix product)."""
    c, k = x.shape[0], 2 * SSIM_RADIUS + 1
    w = _window(x.device, x.dtype)
    along_w = F.conv2d(x[None], w.view(1, 1, 1, k).expand(c, 1, 1, k), groups=c)
    return F.conv2d(along_w, w.view(1, 1, k, 1).expand(c, 1, k, 1), groups=c)[0]


def ssim_map(pred: Tensor, target: Tensor) -> Tensor:
    """SSIM per pixel and channel (differentiable in ``pred``).

    Args:
        pred, target: Tensor  # [H, W, 3] in [0, 1], H and W > 10
    Returns:
        Tensor  # [3, H - 10, W - 10] (the window's valid positions; scikit-image crops the same border)
    """
    x, y = pred.permute(2, 0, 1), target.permute(2, 0, 1)
    stacked = _blur(torch.cat([x, y, x * x, y * y, x * y]))
    mx, my, xx, yy, xy = stacked.split(3)
    vx, vy, cxy = xx - mx * mx, yy - my * my, xy - mx * my  # population (co)variances, as use_sample_covariance=False
    return ((2 * mx * my + _C1) * (2 * cxy + _C2)) / ((mx * mx + my * my + _C1) * (vx + vy + _C2))


def fit_loss(pred: Tensor, target: Tensor, ssim_weight: float) -> Tensor:
    """(1 - ``ssim_weight``) mean |pred - target| + ``ssim_weight`` (1 - mean SSIM) (3DGS's, λ = 0.2);
    L1 alone where the image is too small for the window.

    pred, target: Tensor  # [H, W, 3] -> Tensor  # []"""
    l1 = (pred - target).abs().mean()
    if ssim_weight <= 0 or min(pred.shape[0], pred.shape[1]) <= 2 * SSIM_RADIUS:
        return l1
    return (1.0 - ssim_weight) * l1 + ssim_weight * (1.0 - ssim_map(pred, target).mean())

