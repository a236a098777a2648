"""The one pinhole camera of the project (``Pinhole``): what rays are cast from, what the splats are drawn
at, what a held-out view and a video frame are. Principal point at the image centre, pixel centres at
k + 0.5 (``enerf.cameras.rays``), camera axes OpenGL's (x right, y up, z back) as every pose in enerf.

``GL_TO_CV`` is the one conversion to OpenCV's camera axes (x right, y down, z forward: 3DGS, gsplat,
COLMAP, viser): a camera rotation ``R`` (columns = axes in the world) in one convention is ``R GL_TO_CV``
in the other, both ways (the matrix is its own inverse).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .rays import Rays, make_rays

__all__ = ["GL_TO_CV", "Pinhole", "world_to_cv_camera"]

GL_TO_CV = np.diag([1.0, -1.0, -1.0])  # [3, 3] OpenGL camera axes <-> OpenCV's (its own inverse)


@dataclass(frozen=True)
class Pinhole:
    """A pinhole camera and the pixels of it rendered: every ``stride``-th row and column
    ([ceil(H / s), ceil(W / s)] of them; 1: all)."""

    c2w: np.ndarray | Tensor  # [3, 4] (or [4, 4]) camera-to-world, columns [right, up, back, t] (OpenGL axes)
    width: int
    height: int
    focal: float  # pixels
    stride: int = 1

    def pose(self, like: Tensor | None = None, device: torch.device | str | None = None) -> Tensor:
        """[3, 4] camera-to-world as a tensor: of ``like``'s dtype and device, else float32 on ``device``."""
        c2w = torch.as_tensor(self.c2w)[:3, :4]
        return c2w.to(like) if like is not None else c2w.to(dtype=torch.float32, device=device)

    def centre(self, like: Tensor | None = None) -> Tensor:
        """[3] the camera centre (``pose``'s dtype and device)."""
        return self.pose(like)[:, 3]

    def rays(self, near: float, far: float, use_ndc: bool, device: torch.device | str | None = None) -> Rays:
        """Its rays: Rays with leading shape [ceil(H / s), ceil(W / s)] (NDC when ``use_ndc``; bit-identical
        to ``Scene.rays`` for a scene view)."""
        c2w = torch.tensor(np.asarray(self.c2w, np.float32)[:3, :4], dtype=torch.float32, device=device)
        rays = make_rays(self.height, self.width, self.focal, c2w, near, far, use_ndc)
        return rays if self.stride == 1 else Rays(*(t[::self.stride, ::self.stride] for t in rays))

    def scaled(self, downscale: int) -> "Pinhole":
        """The same camera at 1 / ``downscale`` of its size (sides rounded down, focal divided)."""
        return dataclasses.replace(self, width=self.width // downscale, height=self.height // downscale,
                                   focal=float(self.focal) / downscale)


def world_to_cv_camera(c2w: Tensor) -> tuple[Tensor, Tensor]:
    """(rotation [3, 3], centre [3]): world -> OpenCV camera axes of camera-to-world ``c2w`` [3, 4] (OpenGL
    axes), so that a point ``p`` is at ``(p - centre) @ rotation.T`` in the camera (z forward)."""
    rot, centre = c2w[:3, :3], c2w[:3, 3]
    flip = torch.tensor(np.diagonal(GL_TO_CV), dtype=rot.dtype, device=rot.device)
    return rot.T * flip[:, None], centre
