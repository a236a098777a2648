"""A loaded scene: images, cameras, bounds and splits, never mutated after loading."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .images import Images
from ..cameras.pinhole import Pinhole
from ..cameras.rays import Rays

__all__ = ["Scene"]


@dataclass(frozen=True, eq=False)
class Scene:
    """Posed images of one scene in its normalised "scene space".

    Scene space is the frame of ``poses_bounds.npy`` after LLFF's bound rescale and
    recentering (and spherify, when asked for), or the frame of a Blender scene's transforms;
    ``scene_to_world`` maps it back.
    """

    name: str
    images: Images  # [N, H, W, 3] in [0, 1]: 8-bit codes decoded to float32 when read (a float32 or uint8 array is wrapped)
    poses: np.ndarray  # [N, 3, 4] float32 camera-to-world, columns [right, up, back, t]
    height: int
    width: int
    focal: float  # pixels
    bounds: np.ndarray  # [N, 2] float32 near / far z-depth per view, scene units
    near: float  # sampling range for non-NDC rendering
    far: float
    use_ndc: bool
    i_train: np.ndarray  # [n_train] int64 view indices
    i_test: np.ndarray  # [n_test] int64 view indices
    render_poses: np.ndarray  # [M, 3, 4] float32 video path
    scene_to_world: np.ndarray  # [4, 4] float64 similarity: scene-space points -> poses_bounds.npy frame
    aabb: tuple[float, ...] | None = None  # (xmin, ymin, zmin, xmax, ymax, zmax) of the content, scene space (Blender)

    def __post_init__(self) -> None:
        object.__setattr__(self, "images", Images.of(self.images))

    @property
    def n_views(self) -> int:
        return int(self.images.shape[0])

    def image(self, index: int, stride: int = 1) -> np.ndarray:
        """The image of view ``index``: np.ndarray  # [H, W, 3] float32 in [0, 1]; with ``stride``
        s > 1 every s-th row and column of it, [ceil(H / s), ceil(W / s), 3]."""
        return self.images[index][::stride, ::stride]

    def rays(self, index: int, device: torch.device | str | None = None, stride: int = 1) -> Rays:
        """The rays of view ``index`` (NDC when ``use_ndc``): Rays with leading shape [H, W], or with
        ``stride`` s > 1 those of every s-th row and column, [ceil(H / s), ceil(W / s)] (the pixels
        of ``image(index, stride)``)."""
        return self.camera(index, stride).rays(self.near, self.far, self.use_ndc, device)

    def camera(self, index: int, stride: int = 1) -> Pinhole:
        """View ``index`` as a camera (the pixels of ``image(index, stride)``)."""
        return Pinhole(np.asarray(self.poses[index], np.float32), self.width, self.height, self.focal, stride)

    def cameras(self, views, downscale: int = 1) -> list[Pinhole]:
        """The cameras of ``views`` (indices) at 1 / ``downscale`` of the image size."""
        return [self.camera(int(i)).scaled(downscale) for i in views]
