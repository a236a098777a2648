"""Check the GPU path (nerfacc) and measure what it costs; writes ``gpu_check.json`` and ``gpu_check.md``.

On a machine with a CUDA GPU::

    python -m benchmarks.gpu_check --scene fern --minutes 10      # configs/fern.txt, 4 runs of 10 minutes each

On a CPU it runs everything that needs no CUDA (torch_grid in nerfacc's place), leaves the
nerfacc figures null with the reason, lists what needed CUDA, and exits 0::

    python -m benchmarks.gpu_check --scene demo --minutes 0.2

Three parts, each reported as it runs:

1. ``nerfacc``: whether nerfacc's CUDA extension builds and loads here, the seconds that took
   (its first build JIT-compiles for minutes), or why it does not.
2. ``equality``: nerfacc and torch_grid render the same rays through the same occupancy grid.
   The fixture (``equality_case``): an analytic field whose density is a smooth function of
   position inside the cells where ``occupancy_pattern`` at the cell centre exceeds a level,
   and zero elsewhere; a 32^3 grid over [-1, 1]^3 read off it by ``build_renderer(..., read_off=...)``; three
   levels (sparse, half, dense: about 20, 50 and 80 % of the cells occupied), early stop on
   (transmittance 1e-4) and off; 4,096 rays, some starting or ending inside the box. Per
   case: the grid's occupied fraction, and on CUDA the largest |difference| of rgb, acc and
   depth on the rays where the two algorithms promise the same samples (``ambiguous_rays``
   says where they do not), and the rays whose sample counts differ.
3. ``training``: the scene's hierarchical config and its occupancy-grid config, each with
   ``--conditioning none`` and ``row`` (4 runs, one after the other, same seed), trained for
   ``--minutes`` of their own training time each (held-out evaluation not counted): held-out
   PSNR then, training rays per second, median step time, peak GPU memory, and per renderer
   the row / none median step-time ratio (the design goal is <= 1.03). The grid runs use
   nerfacc on CUDA and torch_grid elsewhere. Scenes: ``configs/<scene>.txt`` is the
   hierarchical run; the grid run is ``configs/<scene>_grid.txt`` where it exists, else the
   same file with ``--N_importance 0`` (one network, as nerfacc's examples).

The training runs reuse the trainer's own setup and step (``enerf.train.nerf.prepare_run`` /
``NerfRun.step``), so they train exactly as ``enerf train`` does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from enerf.atomic import atomic_write_text
from enerf.cli import build_train_parser, run_config_from_args
from enerf.config import RenderConfig, RunConfig
from enerf.cameras.rays import Rays
from enerf.data.resolve import resolve_scene_dir
from enerf.errors import EnerfError
from enerf.render.compositing import exclusive_segment_sum
from enerf.render.marching import march_rays
from enerf.render.nerfacc_backend import nerfacc_status
from enerf.render import Renderer, build_renderer
from enerf.train.evaluate import evaluate_views, summarize
from enerf.train.nerf import prepare_run

from benchmarks.harness import ROOT

__all__ = [
    "BOX",
    "GRID_RESOLUTION",
    "STEP",
    "DENSITY_RANGE",
    "OCCUPANCY_LEVELS",
    "EARLY_STOP_EPS",
    "occupancy_pattern",
    "cell_centres",
    "AnalyticField",
    "analytic_field",
    "equality_rays",
    "EqualityCase",
    "equality_case",
    "ambiguous_rays",
    "samples_per_ray",
    "compare_with_nerfacc",
    "scene_config",
    "run_configs",
    "main",
]

CUDA = torch.device("cuda")
CPU = torch.device("cpu")

# ----------------------------------------------------------------------------- equality fixture

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


# ----------------------------------------------------------------------------- training runs

RENDERER_RUNS = ("grid", "hierarchical")
CONDITIONINGS = ("none", "row")


def scene_config(scene: str, config_dir: Path = ROOT / "configs") -> Path:
    """``configs/<scene>.txt``.

    Raises:
        EnerfError: there is none.
    """
    base = config_dir / f"{scene}.txt"
    if not base.is_file():
        raise EnerfError(f"--scene {scene}: configs/{scene}.txt not found; use a scene with a config file in "
                         f"{config_dir}/ (e.g. demo or fern)")
    return base


def run_configs(scene: str, grid_renderer: str, basedir: str, seed: int, device: str, flags: list[str],
                config_dir: Path = ROOT / "configs") -> dict[tuple[str, str], RunConfig]:
    """{(renderer, conditioning): RunConfig} of the four training runs (see the module doc).

    Raises:
        EnerfError: no ``configs/<scene>.txt``.
    """
    base = scene_config(scene, config_dir)
    grid_file = config_dir / f"{scene}_grid.txt"
    grid_argv = ["--config", str(grid_file)] if grid_file.is_file() else ["--config", str(base), "--N_importance", "0"]
    if grid_renderer == "nerfacc":
        grid_argv += ["--cull_occluded", "false"]  # a torch_grid option (nerfacc refuses it)
    argv = {"grid": [*grid_argv, "--renderer", grid_renderer], "hierarchical": ["--config", str(base), "--renderer", "hierarchical"]}
    common = ["--basedir", basedir, "--seed", str(seed), "--device", device, "--no_lpips", "--quiet", "--kappa_every", "0"]
    parser = build_train_parser()
    return {(renderer, mode): run_config_from_args(parser.parse_args(
                [*argv[renderer], *common, "--conditioning", mode, "--expname", f"{renderer}_{mode}", *flags]))
            for renderer in RENDERER_RUNS for mode in CONDITIONINGS}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_for(cfg: RunConfig, seconds: float, data_root: Path, log) -> dict:
    """Train ``cfg`` for ``seconds`` of its own step time (the trainer's steps), then evaluate on
    all held-out views. Returns its figures (peak GPU memory null off CUDA)."""
    device = torch.device("cuda" if cfg.train.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    run = prepare_run(cfg, data_root)
    step_times: list[float] = []
    clock, next_report = 0.0, seconds / 4
    while clock < seconds or not step_times:
        _sync(device)
        tic = time.perf_counter()
        run.step(len(step_times))
        _sync(device)
        step_times.append(time.perf_counter() - tic)
        clock += step_times[-1]
        if clock >= next_report and clock < seconds:
            log(f"    {clock:7.1f} s, step {len(step_times)}")
            next_report += seconds / 4
    per_image = evaluate_views(run.scene, run.scene.i_test, run.fields, cfg.render, run.device, renderer=run.renderer)
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    batch = run.rays_per_step
    result = {
        "renderer": run.renderer.name, "conditioning": cfg.field.conditioning, "steps": len(step_times),
        "train_seconds": clock, "psnr": summarize(per_image, None)["psnr"], "held_out_views": len(per_image),
        "rays_per_second": batch.rays / clock, "median_step_seconds": statistics.median(step_times),
        "samples_per_ray": batch.samples_per_ray, "queries_per_ray": batch.queries_per_ray,
        "peak_gpu_memory_mib": peak,
    }
    del run
    return result


def training_section(args: argparse.Namespace, cuda_reason: str, log) -> dict:
    """Part 3: the four runs, and the row / none step-time ratio of each renderer."""
    on_cuda = torch.cuda.is_available() and args.device != "cpu"
    grid_renderer = "torch_grid" if cuda_reason else "nerfacc"
    device = "cuda" if on_cuda else "cpu"
    cfgs = run_configs(args.scene, grid_renderer, str(Path(args.out) / "runs"), args.seed, device, shlex.split(args.flags))
    runs = []
    for (renderer, mode), cfg in cfgs.items():
        log(f"  {cfg.render.sampler} / {mode}: {args.minutes:g} min of training ...")
        runs.append(train_for(cfg, args.minutes * 60, Path(args.data_root), log))
        r = runs[-1]
        log(f"    held-out PSNR {r['psnr']:.2f} dB after {r['steps']} steps, {r['rays_per_second']:.0f} rays / s"
            + (f", peak {r['peak_gpu_memory_mib']:.0f} MiB" if r["peak_gpu_memory_mib"] is not None else ""))
    ratios = {}
    for renderer in {r["renderer"] for r in runs}:
        step = {r["conditioning"]: r["median_step_seconds"] for r in runs if r["renderer"] == renderer}
        ratios[renderer] = step["row"] / step["none"]
    return {"scene": args.scene, "minutes_per_run": args.minutes, "device": device, "seed": args.seed,
            "flags": args.flags, "runs": runs, "row_over_none_step_time": ratios, "goal_row_over_none": 1.03,
            "peak_gpu_memory_reason": None if on_cuda else "no CUDA device: peak GPU memory not measured"}


# ----------------------------------------------------------------------------- report


def nerfacc_section() -> dict:
    """Part 1: does nerfacc's extension build and load here; how long that took; why not."""
    tic = time.perf_counter()
    ok, why = nerfacc_status(CUDA)  # builds (or loads) the extension once per process
    seconds = time.perf_counter() - tic
    return {"available": ok, "build_seconds": seconds if torch.cuda.is_available() else None, "reason": None if ok else why}


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def markdown(report: dict) -> str:
    """The report as markdown tables."""
    nerfacc = report["nerfacc"]
    lines = [f"# gpu_check: {report['device']}", "", f"`{report['command']}`", "",
             f"torch {report['torch']}, Python {report['python']}. nerfacc: "
             + (f"available (build / load {nerfacc['build_seconds']:.1f} s)" if nerfacc["available"]
                else f"not available ({nerfacc['reason']})"), "",
             "## Equality: nerfacc vs torch_grid on the same grid", "",
             "| case | occupied | torch_grid samples / ray | nerfacc samples / ray | ambiguous rays | count differs "
             "(promised rays) | max abs diff rgb / acc / depth (promised rays) |",
             "|---|---|---|---|---|---|---|"]
    for e in report["equality"]:
        diff = e["max_abs_diff"]
        shown = " / ".join(_fmt(diff[k], ".1e") for k in ("rgb", "acc", "depth")) if diff else f"n/a: {e['nerfacc_reason']}"
        differ = (f"{e['rays_with_different_counts']} ({e['different_counts_on_promised_rays']})"
                  if e["rays_with_different_counts"] is not None else "n/a")
        lines.append(f"| {e['case']} | {e['occupied_fraction']:.1%} | {e['torch_grid_samples_per_ray']:.1f} | "
                     f"{_fmt(e['nerfacc_samples_per_ray'], '.1f')} | {e['ambiguous_rays']} / {e['n_rays']} | {differ} | {shown} |")
    t = report["training"]
    lines += ["", f"## Training: {t['scene']}, {t['minutes_per_run']:g} min per run on {t['device']}, seed {t['seed']}", "",
              "| renderer | conditioning | steps | held-out PSNR (dB) | training rays / s | median step (ms) | peak GPU memory (MiB) |",
              "|---|---|---|---|---|---|---|"]
    for r in t["runs"]:
        lines.append(f"| {r['renderer']} | {r['conditioning']} | {r['steps']} | {r['psnr']:.2f} | {r['rays_per_second']:.0f} | "
                     f"{r['median_step_seconds'] * 1e3:.1f} | {_fmt(r['peak_gpu_memory_mib'], '.0f')} |")
    lines += ["", "Row / none median step time (goal <= 1.03): "
              + ", ".join(f"{k} {v:.3f}" for k, v in sorted(t["row_over_none_step_time"].items())), ""]
    if report["needed_cuda"]:
        lines += ["Not measured here (needs CUDA):", "", *(f"- {item}" for item in report["needed_cuda"]), ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/gpu_check", help="folder for gpu_check.json, gpu_check.md and the runs")
    parser.add_argument("--scene", default="fern", help="configs/<scene>.txt (and <scene>_grid.txt if present)")
    parser.add_argument("--minutes", type=float, default=10.0, help="training time of each of the four runs")
    parser.add_argument("--seed", type=int, default=0, help="seed of all four runs")
    parser.add_argument("--device", choices=("auto", "cpu"), default="auto",
                        help="cpu: use no CUDA even where there is some (nerfacc figures null, torch_grid trains)")
    parser.add_argument("--data_root", default="data", help="where scenes are found (as enerf train)")
    parser.add_argument("--flags", default="", help="extra enerf train flags for every run, e.g. '--datadir DIR'")
    parser.add_argument("--equality_rays", type=int, default=EQUALITY_RAYS, help="rays per equality case")
    args = parser.parse_args(argv)
    if not args.minutes > 0:
        parser.error(f"--minutes must be positive, got {args.minutes}")
    if args.equality_rays < 1:
        parser.error(f"--equality_rays must be positive, got {args.equality_rays}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)

    def log(text: str) -> None:
        print(text, flush=True)

    try:  # a missing config or scene is reported before anything slow runs
        cfg = run_configs(args.scene, "torch_grid", str(out / "runs"), args.seed, "cpu", shlex.split(args.flags))
        cfg = cfg[("hierarchical", "none")]
        resolve_scene_dir(cfg.data.scene, cfg.data.datadir, Path(args.data_root))
        log("[1/3] nerfacc ...")
        nerfacc = nerfacc_section() if args.device != "cpu" else {
            "available": False, "build_seconds": None, "reason": "--device cpu: CUDA not used"}
        log(f"  {'available' if nerfacc['available'] else 'not available: ' + nerfacc['reason']}")
        cuda_reason = "" if nerfacc["available"] else nerfacc["reason"]
        log(f"[2/3] equality, {args.equality_rays} rays per case ...")
        equality = equality_section(cuda_reason, args.equality_rays, log)
        log(f"[3/3] training on {args.scene}: 2 renderers x 2 conditionings, {args.minutes:g} min each ...")
        training = training_section(args, cuda_reason, log)
    except EnerfError as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    needed = []
    if cuda_reason:
        needed = [f"nerfacc build and status ({cuda_reason})",
                  "equality: nerfacc's rgb, acc, depth and samples per ray (torch_grid's side ran)",
                  "training with nerfacc (torch_grid ran in its place)"]
    if training["peak_gpu_memory_reason"]:
        needed.append("peak GPU memory of the training runs")
    report = {
        "command": "python -m benchmarks.gpu_check " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
        "device": torch.cuda.get_device_name(0) if training["device"] == "cuda"
        else f"CPU ({platform.processor() or platform.machine()})",
        "torch": torch.__version__, "python": platform.python_version(), "threads": torch.get_num_threads(),
        "nerfacc": nerfacc, "equality": equality, "training": training, "needed_cuda": needed,
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "gpu_check.json", json.dumps(report, indent=2) + "\n")
    atomic_write_text(out / "gpu_check.md", markdown(report))
    log(f"wrote {out / 'gpu_check.json'} and {out / 'gpu_check.md'}")
    if needed:
        log("needed CUDA (not measured here): " + "; ".join(needed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
