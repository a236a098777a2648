"""Random ray batches over all training pixels (nerf-pytorch's batching across images).

Nothing is kept per pixel but the scene's images (8-bit codes, ``Images``) and one epoch's
permutation of the pixel indices: a batch's rays are made from its pixels' (view, row,
column) by ``rays_for_pixels``, bit-identical to the rays of whole images (``make_rays``).
The sampler's state is the random generator's state the current epoch's permutation was drawn
from, the epoch and the position in it (a few kilobytes whatever the scene's size); a resumed
run draws the permutation again from that state and goes on with the same batches.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import CheckpointError
from ..cameras.rays import RayExtent, Rays, ray_extent, rays_for_pixels
from .scene import Scene

__all__ = ["RaySampler", "center_box"]


def center_box(height: int, width: int, frac: float) -> tuple[int, int, int, int]:
    """(top, left, rows, columns) of the central ``frac`` box of an image (nerf-pytorch's precrop)."""
    dh, dw = int(height // 2 * frac), int(width // 2 * frac)
    return height // 2 - dh, width // 2 - dw, 2 * dh, 2 * dw


class RaySampler:
    """Draws ``n_rays`` rays per call, walking a fresh random permutation of the training
    pixels each epoch.

    Pixel ``p`` (0 <= p < len(self)) is column ``p % W``, row ``p // W % H`` of training view
    ``p // (H W)`` (the order of ``views``). With ``center_only`` (the first ``precrop_iters``
    steps) a batch is drawn with replacement from the central ``precrop_frac`` box of every view
    (nerf-pytorch's precrop), which helps NeRF find the scene early.

    Args:
        scene: the scene; its images are read, never copied.
        views: the training views (scene indices).
        n_rays: rays per batch (may be changed between batches).
        generator: CPU generator the permutations and precrop draws come from.
        device: where batches are made.
        precrop_frac: size of the central box, as a fraction of the image's height and width.
        patch: p > 0: every batch is ``n_rays // p²`` square patches of p x p pixels instead (random views and
            places, drawn from ``generator``; the pixels patch by patch, each patch's rows in order), for a
            loss that looks at a pixel's neighbours (``--robust_trim``).
    """

    def __init__(
        self,
        scene: Scene,
        views,
        n_rays: int,
        generator: torch.Generator,
        device: torch.device | str = "cpu",
        precrop_frac: float = 0.5,
        patch: int = 0,
    ) -> None:
        self.scene = scene
        self.device = torch.device(device)
        self.views = torch.as_tensor([int(v) for v in views], dtype=torch.long, device=self.device)  # [n_views]
        self.poses = torch.as_tensor(scene.poses, dtype=torch.float32, device=self.device)[self.views]  # [n_views, 3, 4]
        self.n_rays = int(n_rays)
        self.generator = generator
        self.center = center_box(scene.height, scene.width, precrop_frac)
        self.patch = min(int(patch), scene.height, scene.width)
        self._n = len(self.views) * scene.height * scene.width
        self._dtype = torch.int32 if self._n < 2**31 else torch.int64  # the permutation's values, 4 bytes when they fit
        self._order = torch.empty(0, dtype=self._dtype)
        self._pos = 0
        self._epoch = 0
        self._epoch_rng: Tensor | None = None  # generator state the current epoch's permutation was drawn from

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        """Bytes the sampler holds for the current epoch (its permutation, 4 bytes a pixel below 2^31 pixels)."""
        return self._order.numel() * self._order.element_size()

    # ------------------------------------------------------------------ draws
    def draw(self, center_only: bool = False) -> Tensor:
        """The next batch's pixel indices: Tensor  # [n_rays] int64 (see the class docstring)."""
        idx = self._center_indices() if center_only else None
        if idx is None and self.patch > 0:
            idx = self._patch_indices()
        return self._next_indices() if idx is None else idx

    def _patch_indices(self) -> Tensor:
        """``n_rays // patch²`` (at least one) patches at random views and places: [n_patches * patch²]."""
        p, height, width = self.patch, self.scene.height, self.scene.width
        n = max(1, self.n_rays // (p * p))
        view = torch.randint(len(self.views), (n, 1, 1), generator=self.generator)
        top = torch.randint(height - p + 1, (n, 1, 1), generator=self.generator)
        left = torch.randint(width - p + 1, (n, 1, 1), generator=self.generator)
        offsets = torch.arange(p)
        idx = (view * height + top + offsets[:, None]) * width + left + offsets[None, :]  # [n, p, p]
        return idx.reshape(-1)

    def _next_indices(self) -> Tensor:
        if self._pos + self.n_rays > self._order.numel():
            self._epoch_rng = self.generator.get_state()
            # drawn on the CPU generator, kept where the batches are made: one copy an epoch, not one a step
            self._order = torch.randperm(self._n, generator=self.generator, dtype=self._dtype).to(self.device)
            self._epoch += 1
            self._pos = 0
        idx = self._order[self._pos : self._pos + self.n_rays]
        self._pos += self.n_rays
        return idx.long()

    def _center_indices(self) -> Tensor | None:
        """A batch from the central boxes, with replacement; None when the box is empty."""
        top, left, rows, cols = self.center
        per_view = rows * cols
        if per_view == 0:
            return None
        pick = torch.randint(len(self.views) * per_view, (self.n_rays,), generator=self.generator)
        view, rest = pick // per_view, pick % per_view
        height, width = self.scene.height, self.scene.width
        return (view * height + top + rest // cols) * width + left + rest % cols

    def pixels(self, idx: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Pixel indices [n] -> (training view 0..n_views-1, row, column), each Tensor  # [n] int64."""
        height, width = self.scene.height, self.scene.width
        idx = idx.to(self.device)
        return idx // (height * width), idx // width % height, idx % width

    def rays(self, idx: Tensor) -> Rays:
        """Rays [n] of pixels ``idx`` [n] (``rays_for_pixels``)."""
        scene = self.scene
        local, y, x = self.pixels(idx)
        return rays_for_pixels(self.poses[local], y, x, scene.height, scene.width, scene.focal, scene.near, scene.far,
                               scene.use_ndc)

    def batch(self, idx: Tensor) -> tuple[Rays, Tensor]:
        """Rays [n] and colours [n, 3] (float32) of pixels ``idx`` [n]."""
        local, y, x = self.pixels(idx)
        return self.rays(idx), self.scene.images.pixels(self.views[local], y, x, self.device)

    def sample(self, center_only: bool = False) -> tuple[Rays, Tensor]:
        """One batch: (Rays [n_rays], rgb [n_rays, 3])."""
        return self.batch(self.draw(center_only))

    def sample_views(self, center_only: bool = False) -> tuple[Rays, Tensor, Tensor]:
        """One batch and the training view of each ray: (Rays [n_rays], rgb [n_rays, 3], views: Tensor
        # [n_rays] int64, 0 .. len(views) - 1 in the order of ``views``); the same draws as ``sample``."""
        idx = self.draw(center_only)
        return *self.batch(idx), self.pixels(idx)[0]

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """Where the draws are: the generator state the current epoch's permutation came from, the
        epoch and the position in it (no per-pixel data)."""
        return {"epoch_rng": None if self._epoch_rng is None else self._epoch_rng.clone(), "epoch": self._epoch,
                "pos": self._pos, "n_pixels": self._n}

    def load_state_dict(self, state: dict) -> None:
        """Restore ``state_dict()``: the epoch's permutation is drawn again from its generator state.
        (A checkpoint written before this format holds the permutation itself, ``order``.)"""
        if "order" in state:
            self._order, self._pos = state["order"].to(self.device, copy=True), int(state["pos"])
            return
        if int(state["n_pixels"]) != self._n:
            raise CheckpointError(f"the checkpoint's ray sampler drew from {state['n_pixels']} training pixels, this "
                                  f"scene has {self._n}; resume on the scene it was trained on")
        self._epoch, self._pos, self._epoch_rng = int(state["epoch"]), int(state["pos"]), state["epoch_rng"]
        if self._epoch_rng is None:
            self._order = torch.empty(0, dtype=self._dtype)
            return
        replay = torch.Generator().set_state(self._epoch_rng)
        self._order = torch.randperm(self._n, generator=replay, dtype=self._dtype).to(self.device)

    # ------------------------------------------------------------------ for occupancy grids
    def extent(self, chunk: int = 1 << 18) -> RayExtent:
        """Box of the training rays' segments and their mean direction length (``ray_extent``),
        made view by view in blocks of rows of about ``chunk`` rays: bit-identical to the figures
        over all rays at once."""
        scene = self.scene
        height, width = scene.height, scene.width
        rows = max(1, chunk // width)

        def chunks():
            for k in range(len(self.views)):
                for top in range(0, height, rows):
                    y = torch.arange(top, min(top + rows, height), device=self.device)
                    x = torch.arange(width, device=self.device)
                    y, x = y.repeat_interleave(width), x.repeat(y.numel())
                    yield rays_for_pixels(self.poses[k : k + 1], y, x, height, width, scene.focal, scene.near,
                                          scene.far, scene.use_ndc)

        return ray_extent(chunks(), self._n)
