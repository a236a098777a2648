"""What the viewer draws besides the rendering: camera conventions, the run's cameras as frustums,
the initial view, and the panel's text. Plain numpy; no viser here (``server.py`` sends it).

Conventions: enerf's poses are camera-to-world with columns [right, up, back, t] (OpenGL, LLFF);
viser's cameras and frustums are OpenCV's [right, down, forward], as a rotation quaternion
``wxyz`` and a ``position``. The two differ by a flip of the second and third axes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..cameras.pinhole import GL_TO_CV
from ..cameras.scene_kind import look_at_point
from ..loaded_run import LoadedRun
from .render import fov_from_focal

__all__ = ["quat_to_matrix", "matrix_to_quat", "c2w_from_viser", "viser_from_c2w", "Frustum", "frustums",
           "initial_view", "frustum_scale", "camera_spacing", "scene_centre", "run_label", "run_summary", "heldout_psnr"]

def quat_to_matrix(wxyz) -> np.ndarray:
    """Unit quaternion (w, x, y, z) -> rotation matrix [3, 3] (normalised first)."""
    w, x, y, z = np.asarray(wxyz, dtype=np.float64) / np.linalg.norm(wxyz)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def matrix_to_quat(rot: np.ndarray) -> np.ndarray:
    """Rotation matrix [3, 3] -> unit quaternion (w, x, y, z) with w >= 0 (Shepperd's method)."""
    m = np.asarray(rot, dtype=np.float64)
    trace = np.trace(m)
    if trace > 0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    q = np.asarray(q)
    q /= np.linalg.norm(q)
    return -q if q[0] < 0 else q


def c2w_from_viser(wxyz, position) -> np.ndarray:
    """A viser camera (OpenCV axes) as enerf's camera-to-world: np.ndarray  # [3, 4]."""
    rot = quat_to_matrix(wxyz) @ GL_TO_CV
    return np.concatenate([rot, np.asarray(position, dtype=np.float64).reshape(3, 1)], axis=1)


def viser_from_c2w(c2w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """enerf's camera-to-world [3, 4] -> viser's (wxyz [4], position [3])."""
    c2w = np.asarray(c2w, dtype=np.float64)
    rot = c2w[:3, :3]
    rot = rot / np.linalg.norm(rot, axis=0, keepdims=True)  # poses may carry a scale
    return matrix_to_quat(rot @ GL_TO_CV), c2w[:3, 3].copy()


@dataclass(frozen=True)
class Frustum:
    """One camera of the scene to draw."""

    name: str  # scene-tree name, e.g. /cameras/train/003
    view: int
    split: str  # train | test
    wxyz: np.ndarray
    position: np.ndarray
    fov: float  # vertical, radians
    aspect: float  # width / height
    label: str  # held-out views: "view 3: 25.1 dB"; "" for training views


def heldout_psnr(metrics: dict) -> dict[int, float]:
    """View index -> held-out PSNR from a metrics.json's ``per_image`` ({} when absent)."""
    out = {}
    for entry in metrics.get("per_image") or []:
        try:
            out[int(entry["view"])] = float(entry["psnr"])
        except (KeyError, TypeError, ValueError):
            continue
    return out


def frustums(run: LoadedRun, metrics: dict) -> list[Frustum]:
    """The run's training and held-out cameras; held-out ones labelled with their PSNR when
    ``metrics`` (the run's metrics.json) has it."""
    scene = run.scene
    fov = fov_from_focal(scene.focal, scene.height)
    aspect = scene.width / scene.height
    psnr = heldout_psnr(metrics)
    out = []
    for split, views in (("train", scene.i_train), ("test", scene.i_test)):
        for view in views:
            wxyz, position = viser_from_c2w(scene.poses[int(view)])
            label = ""
            if split == "test":
                label = f"view {int(view)}: {psnr[int(view)]:.2f} dB" if int(view) in psnr else f"view {int(view)}"
            out.append(Frustum(f"/cameras/{split}/{int(view):03d}", int(view), split, wxyz, position, fov, aspect,
                               label))
    return out


def camera_spacing(positions: np.ndarray) -> float:
    """The median over the cameras of the distance to the nearest other camera centre (cameras at
    one point are not neighbours); 0 when fewer than two distinct centres.

    Args:
        positions: np.ndarray  # [N, 3] camera centres
    """
    positions = np.asarray(positions, np.float64)
    dist = np.linalg.norm(positions[:, None] - positions[None], axis=-1)  # [N, N]
    dist[dist <= 1e-9] = np.inf
    nearest = dist.min(axis=1)
    nearest = nearest[np.isfinite(nearest)]
    return float(np.median(nearest)) if nearest.size else 0.0


def frustum_scale(run: LoadedRun) -> float:
    """Size of the drawn frustums: a quarter of the cameras' spacing (``camera_spacing``), so
    neighbouring frustums never overlap and a view between cameras is not covered by wireframes;
    1 % of the scene's depth range when all cameras stand at one point."""
    spacing = camera_spacing(run.scene.poses[:, :3, 3])
    if spacing > 0:
        return 0.25 * spacing
    depth = float(run.scene.bounds.min()) if run.scene.bounds.size else 1.0
    return max(0.01 * depth, 1e-3)


def scene_centre(run: LoadedRun) -> np.ndarray:
    """[3] the point the training cameras look at (the least-squares nearest point to their optical
    axes, ``enerf.cameras.scene_kind.look_at_point``); for cameras that look one way (forward-facing,
    NDC rays or no such point), the point the mean depth bound in front of their mean centre, along
    their mean viewing axis."""
    scene = run.scene
    poses = scene.poses[np.asarray(scene.i_train if len(scene.i_train) else np.arange(len(scene.poses)))]
    point = None if scene.use_ndc else look_at_point(poses)
    if point is not None:
        return point
    forward = -(poses[:, :3, 2] / np.linalg.norm(poses[:, :3, 2], axis=1, keepdims=True)).mean(0)
    depth = float(scene.bounds.mean()) if scene.bounds.size else 1.0
    return poses[:, :3, 3].mean(0) + depth * forward / max(float(np.linalg.norm(forward)), 1e-9)


def initial_view(run: LoadedRun, back: float = 0.1, above: float = 0.05) -> dict:
    """Where the browser's camera starts: a little behind (``back`` of its distance to the scene's
    centre, ``scene_centre``) and above (``above`` of it, along the camera's up axis) the first
    training camera, looking at the centre; so the first picture shows the scene from near a
    photographed view, that camera's frustum hidden (``server.py``) and the others small
    (``frustum_scale``) and off to the sides.

    Returns:
        dict: ``position`` [3], ``look_at`` [3] (the centre), ``up`` [3], ``fov`` (vertical, radians),
        ``c2w`` [3, 4] (enerf's axes: its back axis points away from the centre) and the camera's
        view ``index``.
    """
    scene = run.scene
    index = int(scene.i_train[0]) if len(scene.i_train) else 0
    pose = scene.poses[index].astype(np.float64)
    centre = scene_centre(run)
    up = pose[:3, 1] / np.linalg.norm(pose[:3, 1])
    away = pose[:3, 3] - centre
    dist = float(np.linalg.norm(away))
    if dist < 1e-9:  # the camera stands at the centre: keep its own view
        away, dist = pose[:3, 2] / np.linalg.norm(pose[:3, 2]), 1.0
        centre = pose[:3, 3] - away
    position = pose[:3, 3] + back * away + above * dist * up
    forward = (centre - position) / np.linalg.norm(centre - position)
    right = np.cross(forward, up)
    if np.linalg.norm(right) < 1e-9:  # looking along its up axis: keep the camera's right
        right = pose[:3, 0] / np.linalg.norm(pose[:3, 0])
    right /= np.linalg.norm(right)
    true_up = np.cross(right, forward)
    c2w = np.stack([right, true_up, -forward, position], axis=1)
    return {"position": position, "look_at": centre, "up": up, "fov": fov_from_focal(scene.focal, scene.height),
            "c2w": c2w, "index": index}


def run_label(run: LoadedRun, metrics: dict) -> str:
    """One line naming a run: conditioning, steps, held-out PSNR (e.g. ``row · 3000 steps · 25.12 dB``)."""
    cond = run.cfg.field.conditioning
    if run.cfg.train.precond != "none":
        cond += f"+{run.cfg.train.precond}"
    psnr = metrics.get("psnr")
    text = f"{cond} · {run.step} steps"
    return text + (f" · {psnr:.2f} dB" if isinstance(psnr, (int, float)) else "")


def run_summary(run: LoadedRun, metrics: dict) -> str:
    """The panel's markdown about one run: its config and metrics."""
    c = run.cfg
    data = c.data.datadir or c.data.scene
    lines = [
        f"**{c.expname}** ({run.ckpt_path})" if run.ckpt_path else f"**{c.expname}**",
        f"- scene: {data} ({run.scene.width}x{run.scene.height}, {len(run.scene.i_train)} train / "
        f"{len(run.scene.i_test)} held-out views, {'NDC' if run.scene.use_ndc else 'world'} rays)",
        f"- field: {c.field.encoding}, {c.field.netdepth} x {c.field.netwidth}, conditioning {c.field.conditioning}"
        f" ({c.field.conditioned_layers}), precond {c.train.precond}",
        f"- sampler: {c.render.sampler}, {c.render.n_samples}+{c.render.n_importance} samples",
        f"- steps: {run.step} of {c.train.iters}, seed {c.train.seed}",
    ]
    if metrics.get("psnr") is not None:
        lpips = metrics.get("lpips")
        lines.append(f"- held-out: PSNR {metrics['psnr']:.2f} dB, SSIM {metrics.get('ssim', float('nan')):.4f}"
                     + (f", LPIPS {lpips:.4f}" if isinstance(lpips, (int, float)) else ""))
    if metrics.get("train_seconds") is not None:
        lines.append(f"- trained for {metrics['train_seconds']:.0f} s")
    return "\n".join(lines)
