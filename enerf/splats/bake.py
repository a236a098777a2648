"""Bake a trained field into Gaussian splats: start them from the field, then fit them to the photos.

1. **Start from the field** (``field_candidates``, ``merge_candidates``, ``splats_from_candidates``):
   render the training cameras (at most ``init_views`` of them, evenly spread) at 1 / ``init_downscale``
   of their size (``enerf.views.render_views``, the renderer of evaluation). Each pixel whose
   accumulated opacity is at least ``init_min_acc`` (a hazy pixel too: where the field is fog, a faint
   Gaussian rather than a hole) gives a candidate at the ray's median termination depth (where its
   cumulative weight reaches half its opacity: floaters in front and weight left at the far end do not
   pull it, as they pull the expected depth), with the rendered colour, the pixel's opacity and the depth
   map's normal, unless more than ``init_max_violations`` other views see through it (their surface at its
   pixel lies well beyond it: a floater, ``free_space_violations``). The views see the same
   surface many times over, so candidates are pooled in cells as wide as one rendered pixel's
   footprint there and averaged: one Gaussian per cell, a flat disc facing the normal (a ball where
   there is none) with a standard deviation of half the cell, band-0 SH of the colour (higher bands
   0), opacity ``init_opacity`` times the cell's mean accumulated opacity. Unbounded captures keep their
   background: rays that end far away give far, large Gaussians. When there are more cells than
   ``count``, a random subset is kept and widened by sqrt(cells / count).
2. **The field as a teacher** (``teacher_targets``, ``enerf.splats.teacher``): the field rendered at the
   same size from ``teacher_views`` cameras the capture does not have, between neighbouring training
   cameras and pushed in or out along their axes, and from every rendered training camera turned up, down,
   left and right by ``teacher_turn`` degrees (``turned_targets``): where such a view's field draws a surface
   (``turn_spread``: not fog) its pixels teach, and those no training camera frames start Gaussians as in step 1.
3. **Fit** (``fit_splats``): Adam on every parameter (3DGS's learning rates times ``fit_lr``, the
   centres' scaled by the cameras' extent and decaying), for what is left of ``bake_seconds`` after
   steps 1 and 2 (at least a quarter of it): each step renders one training photo (or ``fit_rows``
   consecutive rows of it) at 1 / ``fit_downscale`` of its training size, or in a ``teacher_share`` of
   the steps one of the field's views (``enerf.splats.rasterize``: numba's compiled forward and backward
   passes on a CPU, gsplat on CUDA), and lowers 3DGS's loss, (1 - ``fit_ssim``) L1 + ``fit_ssim``
   (1 - SSIM). With ``random_background`` each step draws the colour behind the splats at random (the
   field's view composited onto it with its accumulated opacity), unless the run composites onto white:
   a photo has no transparent pixel, so the splats must cover it whole. During the first
   ``densify_until`` of the time, every ``densify_every`` steps the Gaussians with the largest
   screen-space gradient are cloned or split and the faint ones pruned (``enerf.splats.densify``), up to ``count``; Gaussians whose
   opacity ends below 1/255 are dropped. After each step no Gaussian's standard deviation exceeds ``max_spread``
   times its distance from the nearest training camera (on the boardgame capture, a handful of splats wider than
   their distance drew a grey veil across a held-out view).

Everything is in the run's scene frame (the normalised frame it trained in); ``enerf.splats.ply``
writes it in the capture's frame. Forward-facing runs trained in NDC bake in that scene frame
too: their surface points are mapped back out of NDC (``render_views``) and the splats are drawn
with a perspective camera, so they need no NDC.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..cameras.pinhole import Pinhole
from ..config import SplatConfig
from ..data.camera_paths import select_cameras
from ..errors import ConfigError
from ..loaded_run import LoadedRun
from ..progress import progress_bar
from ..views import render_views
from .densify import DensityControl
from .gaussians import Splats, rgb_to_sh0
from .rasterize import choose_backend, rasterize, warm_up
from .source import run_background
from .teacher import fit_loss, taught_target, teacher_targets, turned_targets, view_candidates

__all__ = ["BakeReport", "field_candidates", "free_space_violations", "merge_candidates",
           "splats_from_candidates", "init_splats", "fit_targets", "fit_splats", "bake"]

# 3DGS's learning rates (train.py / arguments), the centres' relative to the cameras' extent
LR = {"means": 1.6e-4, "log_scales": 5e-3, "quats": 1e-3, "opacity_logits": 5e-2, "sh0": 2.5e-3, "sh_rest": 2.5e-3 / 20}
SPLIT_FRACTION = 0.01  # densified Gaussians wider than this x the cameras' extent are split, the others cloned (3DGS)
LR_MEANS_FINAL = 1.6e-6  # the centres' rate decays exponentially to this over the fit


@dataclass
class BakeReport:
    """What a bake did (``bake``'s second value)."""

    candidates: int  # pixels that gave a candidate Gaussian
    splats: int  # Gaussians written
    init_seconds: float
    fit_seconds: float
    fit_steps: int
    backend: str  # numba | torch | gsplat | none


def fit_targets(run: LoadedRun, views, downscale: int) -> list[Tensor]:
    """The training photos of ``views`` at 1 / ``downscale`` (means of ``downscale`` x ``downscale`` blocks):
    [H // downscale, W // downscale, 3] float32 each."""
    out = []
    for i in views:
        image = torch.as_tensor(run.scene.image(int(i)))
        h, w = image.shape[0] // downscale, image.shape[1] // downscale
        out.append(image[:h * downscale, :w * downscale].reshape(h, downscale, w, downscale, 3).mean((1, 3)))
    return out


def _disc_quats(normals: np.ndarray) -> np.ndarray:
    """[n, 4] w-x-y-z quaternions turning the z axis onto each unit normal [n, 3] (identity for 0)."""
    n = normals.astype(np.float64)
    q = np.stack([1.0 + n[:, 2], -n[:, 1], n[:, 0], np.zeros(len(n))], -1)
    opposite = 1.0 + n[:, 2] < 1e-6
    q[opposite] = [0.0, 1.0, 0.0, 0.0]
    none = np.linalg.norm(n, axis=-1) < 0.5
    q[none] = [1.0, 0.0, 0.0, 0.0]
    return (q / np.linalg.norm(q, axis=-1, keepdims=True)).astype(np.float32)


def field_candidates(run: LoadedRun, cfg: SplatConfig, progress: bool = True
                     ) -> tuple[dict[str, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The candidate Gaussians of step 1 (module docstring), one per kept pixel of the training views,
    less those that another view sees through (``free_space_violations``), and the cameras rendered.

    Returns:
        dict: points [n, 3] float32 (scene frame), rgb [n, 3] float32, normals [n, 3] float32 (0: none),
        footprint [n] float32 (scene units per pixel of the full-size photo at that depth), acc [n] float32
        (the pixel's accumulated opacity);
        (poses [V, 3, 4], depths [V]): the rendered training cameras and each one's median depth (its
        kept pixels' z-depth; 1 where it kept none)
    """

    cams = select_cameras(run.scene, "train", 1, cfg.init_downscale)
    if 0 < cfg.init_views < len(cams.poses):  # evenly spread: a capture's neighbouring frames see the same surfaces
        pick = np.linspace(0, len(cams.poses) - 1, cfg.init_views).round().astype(int)
        cams = dataclasses.replace(cams, poses=cams.poses[pick], names=[cams.names[i] for i in pick])
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("points", "rgb", "normals", "footprint", "acc")}
    depths = []
    for view in render_views(run, cams, normals=True, progress=progress, desc="splats: render the field",
                             depth="median"):
        keep = view_candidates(parts, view, cfg)
        depths.append(np.where(keep, view.z_depth, 0.0))
    data = {k: np.concatenate(v) for k, v in parts.items()}
    if len(data["points"]) == 0:
        raise ConfigError(f"no pixel of the training views has accumulated opacity {cfg.init_min_acc} or more; "
                          "lower --init_min_acc", ("init_min_acc",))
    seen_through = free_space_violations(data["points"], cams.poses, np.stack(depths), cams.focal)
    medians = np.array([float(np.median(d[d > 0])) if (d > 0).any() else 1.0 for d in depths])
    return {k: v[seen_through <= cfg.init_max_violations] for k, v in data.items()}, (cams.poses, medians)


def free_space_violations(points: np.ndarray, poses: np.ndarray, depths: np.ndarray, focal: float,
                          margin: float = 0.1) -> np.ndarray:
    """How many views see through each point: the point projects into the view's image in front of
    the camera, and the view's surface at that pixel lies more than ``margin`` (relative) beyond it, so
    the view's ray crossed the point's place as empty space (the free-space test of depth-map fusion:
    a floater that one view's median depth put in the air is crossed by the others' rays).

    Args:
        points: [n, 3] scene frame; poses: [V, 3, 4] camera-to-world (OpenGL axes);
        depths: [V, H, W] z-depth of each view's surface (0: none); focal: pixels at that size
    Returns:
        [n] int count of views
    """
    _, height, width = depths.shape
    count = np.zeros(len(points), np.int32)
    for pose, depth in zip(poses, depths):
        local = (points - pose[:3, 3]) @ pose[:3, :3]  # OpenGL camera axes: x right, y up, looking down -z
        z = -local[:, 2]
        front = z > 1e-6
        u = np.floor(focal * local[:, 0] / np.where(front, z, 1.0) + 0.5 * width).astype(np.int64)
        v = np.floor(-focal * local[:, 1] / np.where(front, z, 1.0) + 0.5 * height).astype(np.int64)
        inside = front & (u >= 0) & (u < width) & (v >= 0) & (v < height)
        surface = depth[v.clip(0, height - 1), u.clip(0, width - 1)]
        count += inside & (surface > 0) & (surface > (1.0 + margin) * z)
    return count


def merge_candidates(data: dict[str, np.ndarray], downscale: int) -> dict[str, np.ndarray]:
    """One candidate per surface cell: the training views see the same surface many times over, so
    candidates are pooled in cubic cells as wide as one rendered pixel's footprint there (rounded to a
    power of two, so that neighbours of similar depth share a grid) and each cell's are averaged.

    Returns:
        dict: points, rgb, normals [m, 3] float32 (normals renormalised, 0 where none), size [m] (the cell's edge),
        acc [m] (the cell's mean accumulated opacity; 1 where the candidates carry none)
    """
    level = np.round(np.log2(np.maximum(data["footprint"] * downscale, 1e-9))).astype(np.int64)
    size = np.exp2(level.astype(np.float64))
    cell = np.floor(data["points"] / size[:, None]).astype(np.int64)
    _, group, counts = np.unique(np.concatenate([level[:, None], cell], 1), axis=0, return_inverse=True,
                                 return_counts=True)
    group = group.reshape(-1)

    def mean(values: np.ndarray) -> np.ndarray:
        out = np.zeros((len(counts), values.shape[1]), np.float64)
        np.add.at(out, group, values)
        return out / counts[:, None]

    normals = mean(data["normals"])
    norm = np.linalg.norm(normals, axis=-1, keepdims=True)
    normals = np.where(norm > 0.5, normals / np.maximum(norm, 1e-12), 0.0)
    cell_size = np.zeros(len(counts))
    cell_size[group] = size
    acc = mean(data["acc"][:, None])[:, 0] if "acc" in data else np.ones(len(counts))
    return {"points": mean(data["points"]).astype(np.float32), "rgb": mean(data["rgb"]).astype(np.float32),
            "normals": normals.astype(np.float32), "size": cell_size.astype(np.float32), "acc": acc.astype(np.float32)}


def splats_from_candidates(data: dict[str, np.ndarray], cfg: SplatConfig) -> Splats:
    """Step 1's Gaussians from ``field_candidates``: the candidates merged per surface cell
    (``merge_candidates``), a random subset of ``cfg.count`` of the cells when there are more (each then
    widened by sqrt(cells / count), so that they still cover the surface), each a disc facing its normal
    (a ball where it has none) with a standard deviation of half its cell (``init_scale`` x), the
    rendered colour as band 0, opacity ``init_opacity`` times the cell's accumulated opacity (a hazy
    stretch of the field starts faint Gaussians rather than none)."""
    cells = merge_candidates(data, cfg.init_downscale)
    n = len(cells["points"])
    rng = np.random.default_rng(cfg.seed)
    keep = np.sort(rng.choice(n, cfg.count, replace=False)) if n > cfg.count else np.arange(n)
    sigma = 0.5 * cfg.init_scale * cells["size"][keep] * math.sqrt(max(1.0, n / cfg.count))
    has_normal = np.linalg.norm(cells["normals"][keep], axis=-1) > 0.5
    thickness = np.where(has_normal, sigma * cfg.init_flatness, sigma)
    log_scales = np.log(np.maximum(np.stack([sigma, sigma, thickness], -1), 1e-7)).astype(np.float32)
    sh = np.zeros((len(keep), (cfg.sh_degree + 1) ** 2, 3), np.float32)
    sh[:, 0] = rgb_to_sh0(torch.as_tensor(cells["rgb"][keep])).numpy()
    opacity = np.clip(cfg.init_opacity * cells["acc"][keep], 0.01, 0.99).astype(np.float32)
    return Splats(means=torch.as_tensor(cells["points"][keep]), log_scales=torch.as_tensor(log_scales),
                  quats=torch.as_tensor(_disc_quats(cells["normals"][keep])),
                  opacity_logits=torch.as_tensor(np.log(opacity / (1.0 - opacity))), sh=torch.as_tensor(sh))


def init_splats(run: LoadedRun, cfg: SplatConfig, progress: bool = True
                ) -> tuple[Splats, int, tuple[np.ndarray, np.ndarray]]:
    """Step 1 of the module docstring: (the starting Splats, the number of candidates, the rendered
    training cameras and their median depths as ``field_candidates`` returns them)."""
    data, rendered = field_candidates(run, cfg, progress)
    return splats_from_candidates(data, cfg), len(data["points"]), rendered


def _camera_extent(centres: np.ndarray) -> float:
    """The cameras' extent (3DGS's ``spatial_lr_scale``): 1.1 x the largest distance of a training
    camera centre (``centres`` [V, 3]) from their mean."""
    return 1.1 * float(np.linalg.norm(centres - centres.mean(0), axis=-1).max()) or 1.0


def _leaves(splats: Splats, device) -> dict[str, Tensor]:
    """The fit's parameters (leaf tensors): the Splats' five, the SH split into band 0 and the rest."""
    t = {k: v.detach().to(device) for k, v in splats.tensors().items()}
    sh = t.pop("sh")
    t["sh0"], t["sh_rest"] = sh[:, :1], sh[:, 1:]
    return {k: v.clone().requires_grad_(True) for k, v in t.items()}


def _as_splats(leaves: dict[str, Tensor], antialiased: bool) -> Splats:
    return Splats(means=leaves["means"], log_scales=leaves["log_scales"], quats=leaves["quats"],
                  opacity_logits=leaves["opacity_logits"], sh=torch.cat([leaves["sh0"], leaves["sh_rest"]], 1),
                  antialiased=antialiased)


def _optimizer(leaves: dict[str, Tensor], lr: dict[str, float]) -> torch.optim.Adam:
    fused = next(iter(leaves.values())).device.type in ("cpu", "cuda")  # one kernel a group, not a dozen
    return torch.optim.Adam([{"params": [t], "lr": lr[k], "name": k} for k, t in leaves.items() if t.shape[1:].numel()],
                            eps=1e-15, fused=fused)


def _reindex(opt: torch.optim.Adam, leaves: dict[str, Tensor], src: Tensor, values: dict[str, Tensor],
             fresh: Tensor) -> dict[str, Tensor]:
    """New leaves from ``DensityControl.plan`` (row i starts from old row src[i]) with each row's Adam moments
    carried over (zero where ``fresh``); ``opt``'s groups point at the new leaves."""
    device = next(iter(leaves.values())).device
    new = {k: values[k].to(device).requires_grad_(True) for k in leaves}
    src_d, fresh_d = src.to(device), fresh.to(device)
    for group in opt.param_groups:
        old = group["params"][0]
        name = group["name"]
        state = opt.state.pop(old, {})
        for key in ("exp_avg", "exp_avg_sq"):
            if key in state:
                moved = state[key][src_d]
                moved[fresh_d] = 0.0
                state[key] = moved
        group["params"] = [new[name]]
        if state:
            opt.state[new[name]] = state
    return new


@torch.no_grad()
def _spread_cap(means: Tensor, centres: Tensor, max_spread: float) -> Tensor:
    """[N] the largest log standard deviation each Gaussian may have: log(max_spread x the distance from its mean
    [N, 3] to the nearest training camera centre [V, 3])."""
    return torch.log(max_spread * torch.cdist(means, centres).min(1).values + 1e-9)


def fit_splats(run: LoadedRun, splats: Splats, cfg: SplatConfig, seconds: float, progress: bool = True,
               teacher: tuple[list[Pinhole], list[Tensor]] = ([], [])) -> tuple[Splats, int, str]:
    """Step 2 of the module docstring for ``seconds``: (the fitted Splats, steps taken, backend used).
    ``teacher``: the field's renderings from new cameras (``teacher_targets``), fitted in a
    ``teacher_share`` of the steps."""
    device = run.device
    scene = run.scene
    views = [int(i) for i in scene.i_train]
    cams = scene.cameras(views, cfg.fit_downscale)
    targets = fit_targets(run, views, cfg.fit_downscale)
    height = cams[0].height
    bg = run_background(run.cfg.render).to(device)
    random_bg = cfg.random_background and not run.cfg.render.white_bkgd
    leaves = _leaves(splats, device)
    centres = np.asarray(scene.poses)[views][:, :3, 3]  # [V, 3] the training cameras' centres
    extent = _camera_extent(centres)
    boost = cfg.fit_lr
    lr = {k: LR[k] * boost for k in LR}
    lr["means"] *= extent
    opt = _optimizer(leaves, lr)
    density = DensityControl(len(splats), cfg.densify_grow, cfg.count, SPLIT_FRACTION * extent)
    backend = choose_backend(device)
    rows = height if backend == "gsplat" or cfg.fit_rows == 0 else min(cfg.fit_rows, height)
    gen = torch.Generator().manual_seed(cfg.seed)
    if backend == "numba":
        warm_up()  # numba's first compilation is not fitting time
    centres = torch.as_tensor(centres, dtype=torch.float32, device=device)  # [V, 3]
    cap = None
    tic = time.perf_counter()
    steps = 0
    budget = float(seconds)
    with progress_bar(int(budget), "splats: fit to the photos", progress, unit="s") as bar:
        while (elapsed := time.perf_counter() - tic) < budget:
            taught = bool(teacher[0]) and float(torch.rand((), generator=gen)) < cfg.teacher_share
            if random_bg:  # the photos have no transparency: the splats must cover every pixel themselves
                bg = torch.rand(3, generator=gen).to(device)
            if taught:  # a view between the photos, from the field (whole, at its smaller size), on the same background
                k = int(torch.randint(len(teacher[0]), (1,), generator=gen))
                rgb = rasterize(_as_splats(leaves, splats.antialiased), teacher[0][k], bg, backend=backend)["rgb"]
                target = taught_target(teacher[1][k].to(device), bg, rgb)
            else:
                k = int(torch.randint(len(views), (1,), generator=gen))
                r0 = int(torch.randint(height - rows + 1, (1,), generator=gen))
                target = targets[k][r0:r0 + rows].to(device)
                out = rasterize(_as_splats(leaves, splats.antialiased), cams[k], bg, backend=backend,
                                rows=None if backend == "gsplat" else (r0, r0 + rows))
                rgb = out["rgb"] if backend != "gsplat" else out["rgb"][r0:r0 + rows]
            loss = fit_loss(rgb, target, cfg.fit_ssim)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
            if cfg.max_spread > 0:  # no splat wider than max_spread x its distance from the nearest training camera
                if cap is None or len(cap) != len(leaves["means"]) or steps % 25 == 0:
                    cap = _spread_cap(leaves["means"], centres, cfg.max_spread)
                with torch.no_grad():
                    leaves["log_scales"].clamp_(max=cap[:, None])
            frac = min(1.0, elapsed / budget)
            if cfg.densify_every and not taught and out["uv"].grad is not None:
                density.observe(out["index"].cpu(), out["uv"].grad)
                if steps % cfg.densify_every == 0 and frac < cfg.densify_until:
                    leaves = _reindex(opt, leaves, *density.plan(leaves, gen))
            decay = math.exp((1 - frac) * math.log(LR["means"]) + frac * math.log(LR_MEANS_FINAL))
            opt.param_groups[0]["lr"] = boost * extent * decay
            bar.update(int(time.perf_counter() - tic) - bar.n)
            if steps % 20 == 0:
                bar.set_postfix_str(f"step {steps}, {len(leaves['means']):,} splats, L1 {float(loss.detach()):.4f}",
                                    refresh=False)
    with torch.no_grad():
        if cfg.max_spread > 0:  # the cap from where the means ended
            leaves["log_scales"].clamp_(max=_spread_cap(leaves["means"], centres, cfg.max_spread)[:, None])
        fitted = _as_splats(leaves, splats.antialiased).map(lambda t: t.detach().cpu())
        fitted = fitted.select(fitted.opacities >= 1.0 / 255.0)
    return fitted, steps, backend


def bake(run: LoadedRun, cfg: SplatConfig, progress: bool = True) -> tuple[Splats, BakeReport]:
    """Steps 1 to 3: the run's field baked into Splats (scene frame, CPU tensors) and what it took."""
    if run.scene is None:
        raise ConfigError("the bake needs the run's scene (its training photos): give --datadir")
    tic = time.perf_counter()
    data, rendered = field_candidates(run, cfg, progress)
    turned_cams, turned, more = turned_targets(run, cfg, rendered, progress)
    if more:  # what the turned views see starts Gaussians too
        data = {k: np.concatenate([v, more[k]]) for k, v in data.items()}
    start, candidates = splats_from_candidates(data, cfg), len(data["points"])
    start.antialiased = cfg.antialiased
    cams, views = teacher_targets(run, cfg, rendered, progress) if cfg.bake_seconds > 0 else ([], [])
    teacher = (cams + turned_cams, views + turned) if cfg.bake_seconds > 0 else ([], [])
    init_seconds = time.perf_counter() - tic
    fit_seconds = max(cfg.bake_seconds - init_seconds, 0.25 * cfg.bake_seconds)
    fitted, steps, backend = (fit_splats(run, start, cfg, fit_seconds, progress, teacher) if cfg.bake_seconds > 0
                              else (start, 0, "none"))
    report = BakeReport(candidates, len(fitted), init_seconds, time.perf_counter() - tic - init_seconds, steps, backend)
    return fitted, report
