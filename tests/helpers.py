"""Helpers the tests share that the package has no use for: every pixel's ray of some views at once, a camera
path file's JSON written by hand, the inverse of the LLFF pose conversion, the sampler a name means on a device,
stand-ins for the bake's fit (a run of two plain photos, faint splats), a tiny ``enerf train``, a synthetic
nerfstudio capture (``write_capture``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import imageio.v3 as iio
import numpy as np
import torch
from torch import Tensor

from enerf.cameras.path_file import CAMERA_PATH_FORMAT
from enerf.cameras.pinhole import Pinhole
from enerf.cameras.rays import Rays, flatten_rays
from enerf.cli import main
from enerf.data.scene import Scene
from enerf.render.registry import estimator_class
from enerf.splats.gaussians import Splats, rgb_to_sh0


def training_rays(scene: Scene, indices, device: torch.device) -> tuple[Rays, Tensor]:
    """Rays and colours of every pixel of the given views, all at once (training makes them per batch,
    ``enerf.data.sampler.RaySampler``).

    Returns:
        rays: Rays  # [n_views * H * W]
        rgb: Tensor  # [n_views * H * W, 3]
    """
    per_view = [flatten_rays(scene.rays(int(i), device=device)) for i in indices]
    rays = Rays(*(torch.cat([getattr(r, name) for r in per_view]) for name in Rays._fields))
    rgb = torch.from_numpy(scene.images[list(indices)].reshape(-1, 3)).to(device)
    return rays, rgb


def camera_path_dict(keyframes, frames: int = 0, width: int | None = None, height: int | None = None,
                     fov_y: float | None = None, fps: float | None = None) -> dict:
    """The JSON object of a camera path file (``CameraPath``); keyframes: [K, 3, 4] or [K, 4, 4]."""
    keys = np.asarray(keyframes, dtype=np.float64).reshape(-1, *np.shape(keyframes)[-2:])[:, :3, :4]
    out = {"format": CAMERA_PATH_FORMAT, "version": 1, "frames": int(frames),
           "keyframes": [{"c2w": k.tolist()} for k in keys]}
    for key, value in (("width", width), ("height", height), ("fov_y", fov_y), ("fps", fps)):
        if value is not None:
            out[key] = value
    return out


def cam_from_world_from_llff_pose(pose: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of ``enerf.ingest.colmap_poses.llff_pose_from_cam_from_world``.

    Args:
        pose: np.ndarray  # [3, 5] (or [3, 4]) LLFF pose
    Returns:
        rotation: np.ndarray  # [3, 3] R of cam_from_world
        translation: np.ndarray  # [3] t of cam_from_world
    """
    pose = np.asarray(pose, dtype=np.float64)
    c2w_rot = np.stack([pose[:, 1], pose[:, 0], -pose[:, 2]], 1)
    return c2w_rot.T, -c2w_rot.T @ pose[:, 3]


def resolve_sampler(name: str, device: torch.device, warn=lambda message: None) -> str:
    """The sampler ``--sampler name`` means on ``device`` (``auto``: nerfacc or torch_grid), as
    ``enerf.render.build_renderer`` resolves it; ``warn`` takes its warning lines.

    Raises:
        ConfigError: an unknown name, or ``nerfacc`` where it cannot run.
    """
    return estimator_class(name).resolve(device, warn).name


def camera_on_z(z: float) -> np.ndarray:
    """[3, 4] a camera on the z axis at height z looking down -z (OpenGL axes), columns right, up, back, t."""
    pose = np.eye(4)[:3]
    pose[:, 3] = [0.0, 0.0, z]
    return pose


def plain_photo_run(white: bool) -> SimpleNamespace:
    """A stand-in LoadedRun for ``fit_splats``: two 16 x 16 photos seen from z = 3 and 3.2, all white for a
    ``white_bkgd`` run, else all black (the run's background: black)."""
    poses = np.stack([camera_on_z(3.0), camera_on_z(3.2)]).astype(np.float32)
    scene = SimpleNamespace(i_train=np.arange(2), poses=poses,
                            image=lambda i: np.full((16, 16, 3), float(white), np.float32),
                            cameras=lambda views, downscale: [Pinhole(poses[int(i)], 16, 16, 20.0) for i in views])
    return SimpleNamespace(device=torch.device("cpu"), scene=scene,
                           cfg=SimpleNamespace(render=SimpleNamespace(white_bkgd=white)))


def faint_splats(value: float) -> Splats:
    """A 5 x 5 grid of wide, faint (opacity 0.1) Gaussians of grey level ``value`` on the plane z = 0, covering
    both photos."""
    xy = np.stack(np.meshgrid(np.linspace(-1, 1, 5), np.linspace(-1, 1, 5)), -1).reshape(-1, 2)
    means = torch.as_tensor(np.concatenate([xy, np.zeros((25, 1))], 1), dtype=torch.float32)
    return Splats(means=means, log_scales=torch.full((25, 3), math.log(0.4)), quats=torch.tensor([[1.0, 0, 0, 0]] * 25),
                  opacity_logits=torch.full((25,), math.log(0.1 / 0.9)), sh=rgb_to_sh0(torch.full((25, 3), value))[:, None])


VIEWER_TINY = ["--preset", "none", "--factor", "1", "--netdepth", "2", "--netwidth", "16", "--N_samples", "8",
               "--N_rand", "64", "--no_lpips", "--quiet", "--kappa_every", "0", "--multires", "4", "--multires_views",
               "2", "--view_width", "8"]


def train_tiny(scene: Path, basedir: Path, name: str, iters: int = 4, *flags: str) -> Path:
    """``enerf train`` of a tiny network on ``scene`` in process: the run's checkpoint."""
    argv = ["train", "--datadir", str(scene), "--basedir", str(basedir), "--expname", name, "--iters", str(iters),
            *VIEWER_TINY, *flags]
    assert main(argv) == 0
    return basedir / name / "checkpoints" / "latest.pt"


def look_at(position, target=(0.0, 0.0, 0.0), up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """OpenGL camera-to-world [4, 4] at ``position`` looking at ``target`` (independent of enerf)."""
    back = np.asarray(position, float) - target
    back /= np.linalg.norm(back)
    right = np.cross(up, back)
    right /= np.linalg.norm(right)
    c2w = np.eye(4)
    c2w[:3, :4] = np.stack([right, np.cross(back, right), back, position], 1)
    return c2w


def capture_cameras(n: int, seed: int = 0) -> list[np.ndarray]:
    """``n`` cameras on an arc of radius 4 around the origin, at heights near 1, looking at a point near it."""
    rng = np.random.default_rng(seed)
    return [look_at([4 * math.cos(a), 4 * math.sin(a), 1.0 + rng.normal(0, 0.3)], target=(0.2, -0.1, 0.3))
            for a in np.linspace(0, 2, n)]


def write_capture(folder: Path, n: int = 10, size=(24, 16), meta_extra=None, frame_extra=None, missing=(), seed=0,
                  ext=".png", listed_ext=True) -> Path:
    """A transforms.json of ``n`` frames (images ``images/f_00.png`` of random colours) in ``folder``."""
    rng = np.random.default_rng(seed)
    (folder / "images").mkdir(parents=True)
    frames = []
    for k, c2w in enumerate(capture_cameras(n, seed)):
        name = f"images/f_{k:02d}{ext}"
        if k not in missing:
            iio.imwrite(folder / name, rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
        frame = {"file_path": name if listed_ext else name[: -len(ext)], "transform_matrix": c2w.tolist()}
        frame.update((frame_extra or {}).get(k, {}))
        frames.append(frame)
    meta = {"camera_model": "PINHOLE", "fl_x": 20.0, "fl_y": 20.0, "cx": size[0] / 2, "cy": size[1] / 2,
            "w": size[0], "h": size[1], **(meta_extra or {}), "frames": frames}
    (folder / "transforms.json").write_text(json.dumps(meta))
    return folder
