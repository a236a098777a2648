"""benchmarks/gpu_check.py's part 2, the equality fixture: nerfacc and torch_grid render the same rays through the
same occupancy grid (the module docstring of ``benchmarks.gpu_check`` says what it checks and how)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from enerf.cameras.rays import Rays
from enerf.config import RenderConfig
from enerf.render import Renderer, build_renderer
from enerf.render.compositing import exclusive_segment_sum
from enerf.render.marching import march_rays

__all__ = ["BOX", "GRID_RESOLUTION", "STEP", "DENSITY_RANGE", "OCCUPANCY_LEVELS", "EARLY_STOP_EPS", "occupancy_pattern",
           "cell_centres", "AnalyticField", "analytic_field", "equality_rays", "EqualityCase", "equality_case",
           "ambiguous_rays", "samples_per_ray", "compare_with_nerfacc", "equality_section"]

CUDA = torch.device("cuda")
CPU = torch.device("cpu")

BOX = (-1.0, -1.0, -1.0, 1.0, 1.0, 1.0)
GRID_RESOLUTION = 32
# render_step_size, in ray t (|directions| is about 2). Not a binary fraction, so nerfacc's repeated
# float32 additions round (with 1/128 they are exact but where t crosses a power of two).
STEP = 1.0 / 100
DENSITY_RANGE = (2.0, 14.0)  # density inside occupied cells; 2 * STEP * |d| (>= 2) = 0.04 > occ_thre 0.01
OCCUPANCY_LEVELS = {"sparse": 0.36, "half": 0.09, "dense": -0.22}  # occupancy_pattern level of each case
EARLY_STOP_EPS = 1e-4
EQUALITY_RAYS = 4096
TIE_T = 3e-5  # |t| within which a step's midpoint is "at" an occupancy change (nerfacc's t drift: see ambiguous_rays)
TIE_DEPTH = 1e-3  # optical depth within which a sample is "at" the early stop


def occupancy_pattern(x, y, z, xp=np):
    """The smooth function of position whose value at a cell's centre decides the fixture's
    occupied cells (value > ``OCCUPANCY_LEVELS[case]``). ``xp``: ``numpy`` or ``torch``."""
    return xp.cos(2.3 * x + 0.4) * xp.cos(1.9 * y - 0.3) * xp.cos(1.6 * z + 0.2) + 0.35 * xp.sin(2.7 * (x - y) + 1.7 * z)


def density_profile(x, y, z, xp=np):
    """Density inside occupied cells, a smooth function of position in ``DENSITY_RANGE``."""
    lo, hi = DENSITY_RANGE
    return lo + (hi - lo) * (0.5 + 0.5 * xp.sin(3.0 * x + 2.0 * y - z))


def cell_centres(resolution: int = GRID_RESOLUTION) -> np.ndarray:
    """np.ndarray  # [res, res, res, 3] float64 centres of the cells of ``BOX``, indexed [ix, iy, iz]."""
    axes = [lo + (np.arange(resolution) + 0.5) / resolution * (hi - lo) for lo, hi in zip(BOX[:3], BOX[3:])]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)


@dataclass(frozen=True)
class AnalyticField:
    """The fixture's field: density ``density_profile`` inside the ``occupied`` cells of ``BOX``, 0
    elsewhere (so a grid read off it is exactly ``occupied``, whatever point of a cell is drawn);
    colour ``sigmoid(2 x + viewdir)``.

    occupied: Tensor  # [res, res, res] bool
    """

    occupied: Tensor

    def sigma(self, points: Tensor) -> Tensor:
        """points [n, 3] -> density [n]."""
        res = self.occupied.shape[0]
        lo, hi = points.new_tensor(BOX[:3]), points.new_tensor(BOX[3:])
        unit = (points - lo) / (hi - lo)
        inside = ((unit >= 0) & (unit < 1)).all(dim=-1)
        ijk = (unit * res).floor().long().clamp(0, res - 1)
        on = self.occupied.to(points.device)[ijk[..., 0], ijk[..., 1], ijk[..., 2]] & inside
        dens = density_profile(points[..., 0], points[..., 1], points[..., 2], xp=torch)
        return torch.where(on, dens, torch.zeros_like(dens))

    def density(self, points: Tensor, noise_std: float = 0.0) -> tuple[Tensor, Tensor]:
        """points [..., 3] -> (density [...], features: the points)."""
        return self.sigma(points), points

    def mean_density(self, points: Tensor, noise_std: float = 0.0) -> Tensor:
        return self.sigma(points)

    def color(self, features: Tensor, viewdirs: Tensor) -> Tensor:
        """features (the points), viewdirs [..., 3] -> rgb [..., 3]."""
        return torch.sigmoid(2 * features + viewdirs)

    @property
    def fields(self) -> dict:
        """The renderer's fields: this one as ``coarse``."""
        return {"coarse": self}


def analytic_field(occupancy: str) -> AnalyticField:
    """The fixture field of case ``occupancy`` (sparse, half or dense)."""
    centres = torch.from_numpy(cell_centres())
    pattern = occupancy_pattern(centres[..., 0], centres[..., 1], centres[..., 2], xp=torch)
    return AnalyticField(pattern > OCCUPANCY_LEVELS[occupancy])


def equality_rays(n: int = EQUALITY_RAYS, seed: int = 7) -> Rays:
    """Rays [n] from z = -1.5 heading roughly +z (|directions| >= 2) through ``BOX``, which they
    enter at t = 0.25 and leave near t = 1.25; near in [0, 0.5] and far in [1, 1.5], so some
    start and some end inside the box."""
    g = torch.Generator().manual_seed(seed)
    origins = torch.cat([torch.rand(n, 2, generator=g) * 1.8 - 0.9, torch.full((n, 1), -1.5)], dim=-1)
    directions = torch.cat([torch.randn(n, 2, generator=g) * 0.3, torch.full((n, 1), 2.0)], dim=-1)
    return Rays(origins=origins, directions=directions, viewdirs=directions / directions.norm(dim=-1, keepdim=True),
                near=torch.rand(n, 1, generator=g) * 0.5, far=1.0 + torch.rand(n, 1, generator=g) * 0.5)


@dataclass
class EqualityCase:
    """One equality case: its field, rays, and torch_grid renderer on the CPU (its grid read off the field)."""

    name: str
    occupancy: str
    early_stop: bool
    field: AnalyticField
    rays: Rays
    renderer: Renderer

    @property
    def cfg(self) -> RenderConfig:
        return self.renderer.cfg


def equality_case(occupancy: str, early_stop: bool, n_rays: int = EQUALITY_RAYS) -> EqualityCase:
    """Build a case: the grid is read off the field by ``build_renderer`` (one warm-up update, one random point
    per cell, from a fixed seed; torch's global random state is left as it was).

    ``early_stop_block`` is 0: torch_grid drops occluded samples with a density pre-pass, as
    nerfacc does (its front-to-back path keeps the same samples; tests/unit/test_marching.py)."""
    field = analytic_field(occupancy)
    rays = equality_rays(n_rays)
    cfg = RenderConfig(sampler="torch_grid", render_step_size=STEP, grid_resolution=GRID_RESOLUTION,
                       early_stop_eps=EARLY_STOP_EPS if early_stop else 0.0, early_stop_block=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        renderer = build_renderer(cfg, CPU, rays=rays, aabb=BOX, read_off=field)
    name = f"{occupancy}, early stop {'on' if early_stop else 'off'}"
    return EqualityCase(name, occupancy, early_stop, field, rays, renderer)


@torch.no_grad()
def ambiguous_rays(case: EqualityCase, tie_t: float = TIE_T, tie_depth: float = TIE_DEPTH) -> Tensor:
    """Tensor  # [n_rays] bool: rays on which nerfacc and torch_grid may keep different samples
    through rounding alone.

    Both march the lattice ``t_k = near + k * step`` and keep step k when its midpoint lies in
    the box, in [near, far) and in an occupied cell; they differ in how they get there
    (nerfacc 0.5.3, ``cuda/csrc/grid.cu``, ``traverse_grids_kernel``):

    * nerfacc adds the step in float32 (``t_last += dt``), torch_grid computes
      ``near + k * step``: after k steps nerfacc's t may have drifted by k float32 roundings
      (at most about 1e-5 after 200 steps; the float32 re-enactment in
      tests/e2e/test_nerfacc_equality.py drifts by under 2e-6 with this fixture);
    * nerfacc finds cells by a voxel walk whose cell boundaries are computed from
      ``tmin + 1e-6`` (``setup_traversal``: each boundary sits 1e-6 early) and advanced by
      adding the cell width; torch_grid takes ``floor`` of the midpoint's position;
    * early stop: nerfacc's transmittance is a float32 ``exclusive_sum`` of its own
      ``sigma * (t_end - t_start)``, torch_grid's a float64 one.

    So a ray is ambiguous when a lattice midpoint lies within ``tie_t`` (in t) of a change of
    "kept" (an occupied / empty cell face, the box, near or far), or, with early stop, when a
    sample's optical depth in front of it lies within ``tie_depth`` of ``-log(early_stop_eps)``.
    Elsewhere the algorithms promise the same samples."""
    rays, grid, step = case.rays, case.renderer.estimator.grid, case.cfg.render_step_size
    o, d = rays.origins.double(), rays.directions.double()
    near, far = rays.near.reshape(-1).double(), rays.far.reshape(-1).double()
    n_steps = int(math.ceil(float((far - near).max()) / step)) + 1
    mids = near[:, None] + (torch.arange(n_steps, dtype=torch.float64) + 0.5) * step  # [n_rays, n_steps]

    def kept(t: Tensor) -> Tensor:
        points = (o[:, None] + t[..., None] * d[:, None]).reshape(-1, 3)
        return grid.occupied(points).reshape(t.shape) & (t >= near[:, None]) & (t < far[:, None])

    ambiguous = (kept(mids - tie_t) != kept(mids + tie_t)).any(dim=1)
    eps = case.cfg.early_stop_eps
    if eps > 0:
        ray_indices, t_starts, t_ends = march_rays(rays.origins, rays.directions, rays.near, rays.far, grid, step)
        points = rays.origins[ray_indices] + (0.5 * (t_starts + t_ends))[:, None] * rays.directions[ray_indices]
        thickness = (case.field.sigma(points) * (t_ends - t_starts) * rays.directions.norm(dim=-1)[ray_indices]).double()
        before = exclusive_segment_sum(thickness, ray_indices, rays.origins.shape[0])
        at_stop = (before + math.log(eps)).abs() < tie_depth
        ambiguous[ray_indices[at_stop]] = True
    return ambiguous


@torch.no_grad()
def samples_per_ray(renderer: Renderer, rays: Rays, fields: dict) -> Tensor:
    """Tensor  # [n_rays] int64: samples ``renderer`` renders on each ray of ``fields`` (eval: no jitter)."""
    ray_indices = renderer.estimator.sample(rays, fields, train=False).ray_indices
    return torch.bincount(ray_indices.cpu(), minlength=rays.origins.shape[0])


def _renderer_on(case: EqualityCase, device: torch.device, use_nerfacc: bool) -> Renderer:
    """A copy of the case's torch_grid renderer on ``device`` (nerfacc's when ``use_nerfacc``)."""
    cfg = dataclasses.replace(case.cfg, sampler="nerfacc" if use_nerfacc else "torch_grid")
    return build_renderer(cfg, device, state=case.renderer.state_dict())


@torch.no_grad()
def compare_with_nerfacc(case: EqualityCase, device: torch.device = CUDA) -> dict:
    """Render the case with torch_grid and with nerfacc on ``device`` (CUDA) and compare.

    Returns:
        dict: ``max_abs_diff`` {rgb, acc, depth} over the rays where the algorithms promise the
        same samples (not ``ambiguous_rays``) and ``max_abs_diff_all_rays``; the rays whose
        sample counts differ, all and among the promised ones; mean samples per ray of each.
    """
    rays = Rays(*(t.to(device) for t in case.rays))
    fns = case.field.fields
    ours, theirs = _renderer_on(case, device, False), _renderer_on(case, device, True)
    count_ours, count_theirs = samples_per_ray(ours, rays, fns), samples_per_ray(theirs, rays, fns)
    a, b = ours.render_image(rays, fns), theirs.render_image(rays, fns)
    promised = ~ambiguous_rays(case)
    differ = count_ours != count_theirs
    diff = {key: (a[key] - b[key]).abs().reshape(a[key].shape[0], -1).amax(dim=1) for key in ("rgb", "acc", "depth")}
    return {
        "max_abs_diff": {key: float(v[promised].max()) if promised.any() else None for key, v in diff.items()},
        "max_abs_diff_all_rays": {key: float(v.max()) for key, v in diff.items()},
        "rays_with_different_counts": int(differ.sum()),
        "different_counts_on_promised_rays": int((differ & promised).sum()),
        "nerfacc_samples_per_ray": float(count_theirs.double().mean()),
    }


def equality_section(cuda_reason: str, n_rays: int, log) -> list[dict]:
    """Part 2: every case's occupied fraction and torch_grid figures, and nerfacc's comparison
    where CUDA and nerfacc are at hand (else its fields null, with ``cuda_reason``)."""
    results = []
    for occupancy in OCCUPANCY_LEVELS:
        for early_stop in (False, True):
            case = equality_case(occupancy, early_stop, n_rays)
            counts = samples_per_ray(case.renderer, case.rays, case.field.fields)
            entry = {
                "case": case.name, "occupancy": occupancy, "early_stop": early_stop,
                "early_stop_eps": case.cfg.early_stop_eps, "n_rays": n_rays,
                "occupied_fraction": float(case.renderer.estimator.grid.binaries.float().mean()),
                "torch_grid_samples_per_ray": float(counts.double().mean()),
                "ambiguous_rays": int(ambiguous_rays(case).sum()),
                "max_abs_diff": None, "max_abs_diff_all_rays": None, "rays_with_different_counts": None,
                "different_counts_on_promised_rays": None, "nerfacc_samples_per_ray": None,
                "nerfacc_reason": cuda_reason or None,
            }
            if not cuda_reason:
                entry.update(compare_with_nerfacc(case))
            results.append(entry)
            diff = entry["max_abs_diff"]
            shown = "nerfacc: " + (cuda_reason if cuda_reason else ", ".join(f"{k} {v:.1e}" for k, v in diff.items()))
            log(f"  {case.name:26s} occupied {entry['occupied_fraction']:6.1%}, "
                f"{entry['torch_grid_samples_per_ray']:5.1f} samples / ray; {shown}")
    return results
