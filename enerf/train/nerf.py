"""A NeRF training run: its step (``NerfRun.step``), evaluations and checkpoint extras.

``NerfRun`` holds a run's scene, fields, ray sampler and renderer; ``NerfRun.step`` is the whole
training step in one function (learning rate, grid update, batch, render, record, losses,
backward, update); the shared loop (``enerf.train.loop``) keeps the cadence around it.

One run writes into ``<basedir>/<expname>/``::

    config.json            the resolved RunConfig
    checkpoints/latest.pt  self-describing checkpoint (atomic write)
    metrics.json           held-out psnr / ssim / lpips, per_image, steps, train_seconds, wall_seconds, ...
    test_views/            held-out renderings
    tb/                    TensorBoard scalars (loss, psnr, lr, kappa per layer)
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..atomic import atomic_write_json
from ..checkpoint import load_checkpoint, renderer_state
from ..config import DATA_ROOT, RunConfig
from ..cameras.normalize import transform_record
from ..data.camera_record import cameras_record
from ..data.loaders import load_scene
from ..data.sampler import RaySampler
from ..data.scene import Scene
from ..device import select_device
from ..errors import CheckpointError, ConfigError
from ..render.build import build_fields
from ..fields.appearance import Appearance
from ..fields.nerf import NeRFField
from ..metrics import make_lpips, mse_to_psnr
from ..nn.conditioning import condition_numbers
from ..optim import PreconditionedOptimizer
from ..render import Renderer, build_renderer
from ..rng import seed_everything
from ..runfolder import check_output_dir, config_run_folder
from .divergence import black_level_psnr, black_warning
from ..distributed import (average_gradients, broadcast_parameters, process_group, rank_device, rank_generator,
                          shard_batch, sum_over_ranks)
from .evaluate import evaluate_views, metrics_record, summarize
from .short_run import capped_stride, render_rate, stride_line
from .loop import Evaluation, StepResult, train_loop
from .rays_per_step import RaysPerStep
from .visibility import VisibilityLoss
from .state import LoopState, optimizer_from_config, restore_loop_state, set_learning_rates

__all__ = ["train_nerf", "NerfRun", "prepare_run", "nerf_losses", "photometric_mse", "robust_mask", "sampler_record", "trained_modules"]


def photometric_mse(rgb: Tensor, target: Tensor, trim: float = 0.0, patch: int = 0) -> Tensor:
    """Mean squared error of rendered colours, over the inliers of RobustNeRF's mask when ``trim`` > 0.

    A pixel is an outlier candidate when its error (mean over channels) is above the batch's 1 - ``trim``
    quantile (no part of the gradient). With ``patch`` = p > 0 the rays are p x p patches (``RaySampler``'s
    ``patch``) and a candidate is left out only when it is an outlier to RobustNeRF's three tests too: fewer
    than half of its 3 x 3 neighbourhood are below the threshold, and its patch is not an inlier patch (more
    than 60 % of it inliers after the first two tests makes the patch's central half inliers). With p = 0
    every candidate is left out (a trimmed loss per ray).

    Args:
        rgb, target: Tensor  # [n_rays, 3], with ``patch``: patch after patch, p² rays each
    """
    if trim <= 0:
        return torch.mean((rgb - target) ** 2)
    per_ray = torch.mean((rgb - target) ** 2, dim=-1)  # [n_rays]
    inlier = per_ray <= torch.quantile(per_ray.detach(), 1.0 - trim)
    if patch > 0:
        inlier = robust_mask(inlier, patch)
    return per_ray[inlier].mean()


def robust_mask(inlier: Tensor, patch: int) -> Tensor:
    """RobustNeRF's mask. inlier: Tensor  # [n_rays] bool, patch after patch (p² rays each; rays past the
    last whole patch stay as they are) -> Tensor  # [n_rays] bool: inliers, their neighbours' and patches'."""
    whole = inlier.numel() // (patch * patch) * patch * patch
    grid = inlier[:whole].reshape(-1, 1, patch, patch).float()  # [n_patches, 1, p, p]
    # 1. at least half the 3 x 3 neighbourhood (zeros beyond the patch, counted) is an inlier
    neighbours = torch.nn.functional.avg_pool2d(grid, 3, stride=1, padding=1, count_include_pad=True)
    pixel = (grid > 0) | (neighbours >= 0.5)
    # 2. a patch more than 60 % inliers: its central half (the inner patch) all inliers
    lo = patch // 4
    inner = torch.zeros(patch, patch, dtype=torch.bool, device=inlier.device)
    inner[lo:lo + patch // 2, lo:lo + patch // 2] = True
    whole_patch = pixel.float().mean(dim=(1, 2, 3), keepdim=True) > 0.6
    return torch.cat([(pixel | (whole_patch & inner)).reshape(-1), inlier[whole:]])


def nerf_losses(out: dict, target: Tensor, fields: dict | None = None, tv_weight: float = 0.0,
                trim: float = 0.0, patch: int = 0) -> dict[str, Tensor]:
    """The named loss terms of a step: photometric MSE of the final pass and of the coarse pass if any
    (``photometric_mse``, ``trim`` and ``patch``: the robust loss), the renderer's own terms, and ``tv_weight`` x the
    total variation of every field's learned position encoding (triplane).

    Args:
        out: the renderer's output, rgb: Tensor  # [n_rays, 3] (+ rgb_coarse), each as the ray's photo sees it
        target: Tensor  # [n_rays, 3]
    """
    losses = {"mse": photometric_mse(out["rgb"], target, trim, patch)}
    if "rgb_coarse" in out:
        losses["mse_coarse"] = photometric_mse(out["rgb_coarse"], target, trim, patch)
    losses.update(out.get("loss_terms") or {})  # the renderer's own (proposal sampler: proposal, distortion)
    if tv_weight > 0 and fields:
        encodings = [f.pos_encoding for f in fields.values()
                     if hasattr(getattr(f, "pos_encoding", None), "total_variation")]
        if encodings:
            losses["tv"] = tv_weight * sum(e.total_variation() for e in encodings)
    return losses


def work_record(rays_per_step: RaysPerStep) -> dict:
    """Per training ray so far: network queries, and rendered points whose colour was skipped."""
    return {"queries_per_ray": rays_per_step.queries_per_ray,
            "colour_skipped_per_ray": rays_per_step.colour_skipped_per_ray}


def sampler_record(renderer, rays_per_step: RaysPerStep) -> dict:
    """The estimator's own figures per training ray so far (``Estimator.record``; grid renderers:
    the fraction of occupied cells and the points grid updates have sent to the field per
    training ray, not part of ``queries_per_ray``); {} for the others."""
    return renderer.estimator.record(rays_per_step.rays)


@dataclass
class NerfRun:
    """A NeRF training run (``prepare_run``): what its steps and evaluations use, and the
    methods the training loop (``enerf.train.loop``) calls."""

    cfg: RunConfig
    device: torch.device
    scene: Scene
    fields: dict[str, NeRFField]
    optimizer: PreconditionedOptimizer
    generator: torch.Generator
    sampler: RaySampler
    renderer: Renderer
    rays_per_step: RaysPerStep
    eval_views: list[int]
    loop: LoopState
    resumed: bool = False
    warmup_psnr: float | None = None  # best training PSNR logged in the first warmup_steps steps
    progress: bool = True  # progress bars of the evaluations (on a terminal; --quiet: off)
    logged_psnr: list[float] = field(default_factory=list)  # training PSNRs logged since the last evaluation
    load_seconds: float = 0.0  # wall-clock seconds prepare_run took (scene, fields, renderer)
    appearance: Appearance | None = None  # --appearance affine: the training photos' colour transforms
    visibility: VisibilityLoss | None = None  # --visibility_loss w > 0

    command = "enerf train"
    final_scalar = ("test/psnr", "psnr")


    @property
    def warmup_steps(self) -> int:
        return max(self.cfg.train.log_every, self.cfg.train.iters // 10)

    def step(self, step: int, progress: float = 0.0) -> StepResult:
        """Training step ``step`` (0-based), ``progress`` in [0, 1] through the run (the learning
        rate's cooldown). Data-parallel runs (``enerf.distributed``) take one global batch:
        each rank renders its share, the gradient is the global batch's."""
        train, renderer, optimizer = self.cfg.train, self.renderer, self.optimizer
        # 1. the learning rate of every parameter group (state.learning_rate)
        lr = set_learning_rates(optimizer, train, step, progress)
        # 2. the estimator's own update (an occupancy grid's, every grid_update_every steps)
        renderer.update(step, self.fields, self.generator)
        # 3. the batch: rays_per_step.n_rays random training pixels (this rank's share of them) and their photos
        self.sampler.n_rays = n_rays = self.rays_per_step.n_rays
        rays, target, views = shard_batch(*self.sampler.sample_views(center_only=step < train.precrop_iters))
        # 4. render (jitter from this rank's own generator); each colour as its photo sees it (--appearance)
        out = renderer.render_rays(rays, self.fields, train=True, generator=rank_generator(self.generator))
        if self.appearance is not None:
            out.update({k: self.appearance(out[k], views) for k in ("rgb", "rgb_coarse") if k in out})
        # 5. record the work (summed over ranks); it sizes the next batch for the target samples per step
        self.rays_per_step.record(*sum_over_ranks(target.shape[0], out["n_samples"], out["n_queries"],
                                                  out["n_colour_skipped"]))
        # 6. the named loss terms: photometric, the renderer's own, total variation, the optimizer's penalties,
        # the visibility loss
        patch = self.sampler.patch if step >= train.precrop_iters else 0  # precrop batches are single rays
        losses = {**nerf_losses(out, target, self.fields, train.tv_weight, train.robust_trim, patch),
                  **optimizer.penalties()}
        if self.visibility is not None:
            losses["visibility"] = self.visibility(self.fields, self.generator)
        loss = sum(losses.values())
        del out  # what the loss does not hold is freed before the backward pass
        # 7. the one backward pass; the gradient of the global batch, each rank weighted by its share
        optimizer.zero_grad(set_to_none=True)
        optimizer.backward(loss)
        average_gradients(optimizer.params, target.shape[0] / n_rays)
        # 8. the update (BNP's transform and decoupled decay inside)
        optimizer.step()
        return StepResult(losses, loss, lr)

    def named_parameters(self):
        return ((f"{n}.{k}", p) for n, f in self.fields.items() for k, p in f.named_parameters())

    def log(self, step: int, losses: dict, loss: torch.Tensor) -> tuple[dict[str, str], dict[str, float]]:
        train_psnr = mse_to_psnr(losses["mse"].item())
        if step <= self.warmup_steps:
            self.warmup_psnr = train_psnr if self.warmup_psnr is None else max(train_psnr, self.warmup_psnr)
        self.logged_psnr.append(train_psnr)
        return {"loss": f"{loss.item():.4f}", "psnr": f"{train_psnr:.2f}"}, {"train/psnr": train_psnr}

    def train_psnr(self) -> float | None:
        """Mean of the training-batch PSNRs logged (every ``log_every`` steps) since the last call;
        None when none was. The ``train_psnr`` of each ``history`` entry."""
        values, self.logged_psnr = self.logged_psnr, []
        return float(np.mean(values)) if values else None

    def kappa_module(self) -> NeRFField:
        return self.fields["coarse"]

    def evaluate(self, step: int) -> Evaluation:
        per_image = evaluate_views(self.scene, self.eval_views, self.fields, self.cfg.render, self.device,
                                   renderer=self.renderer, progress=self.progress, desc=f"eval at step {step}",
                                   leave=False, stride=self.cfg.train.eval_stride)
        psnr = float(np.mean([p["psnr"] for p in per_image]))
        record = {"psnr": psnr, "train_psnr": self.train_psnr(), **work_record(self.rays_per_step),
                  **sampler_record(self.renderer, self.rays_per_step)}
        return Evaluation(record, {"test/psnr": psnr}, f"held-out PSNR {psnr:.2f} dB")

    def checkpoint_fields(self) -> dict[str, dict]:
        """The weights of every field, and of the photos' colour transforms under ``--appearance``
        (``appearance``: loaded back on ``--resume`` only; the field alone renders the mean appearance)."""
        return {name: m.state_dict() for name, m in trained_modules(self.fields, self.appearance).items()}

    def checkpoint_extras(self) -> dict:
        return {"sampler": self.sampler.state_dict(), "renderer": self.renderer.state_dict(),
                "rays_per_step": self.rays_per_step.state_dict(), "warmup_psnr": self.warmup_psnr,
                "scene_transform": transform_record(self.scene.scene_to_world),  # scene space -> capture frame
                "cameras": cameras_record(self.scene)}  # render / mesh / export without the scene folder

    def final_stride(self, train_seconds: float) -> int:
        """The final evaluation's stride: ``eval_stride``, or with ``cap_outputs`` on a run that trained
        for less time than scoring every pixel would take, the stride that fits the training time
        (``enerf.train.short_run``; one line says so)."""
        cfg, scene = self.cfg, self.scene
        if not cfg.train.cap_outputs or len(scene.i_test) == 0:
            return cfg.train.eval_stride
        rate = render_rate(scene, int(scene.i_test[0]), self.fields, cfg.render, self.device, self.renderer)
        rays = len(scene.i_test) * scene.height * scene.width
        stride = capped_stride(train_seconds, rays, rate)
        if stride <= cfg.train.eval_stride:
            return cfg.train.eval_stride
        print(stride_line(stride, len(scene.i_test), train_seconds, rays / rate), flush=True)
        return stride

    def finish(self, state: LoopState, out_dir: Path, ckpt_path: Path) -> dict:
        """Render and score every held-out view (test_views/), write metrics.json."""
        cfg, scene, device, renderer, rays_per_step = self.cfg, self.scene, self.device, self.renderer, self.rays_per_step
        steps, train_seconds = state.step, state.train_seconds
        tic = time.perf_counter()
        stride = self.final_stride(train_seconds)
        lpips_metric, lpips_error = make_lpips(device) if cfg.train.compute_lpips else (None, "disabled by config")
        per_image = evaluate_views(scene, scene.i_test, self.fields, cfg.render, device, lpips_metric,
                                   out_dir / "test_views", renderer=renderer, progress=self.progress,
                                   stride=stride, report=self.progress)
        wall = {"load": self.load_seconds, "train": state.wall_seconds, "eval": time.perf_counter() - tic}
        scored = len(scene.i_test) * -(-scene.height // stride) * -(-scene.width // stride)
        summary = summarize(per_image, lpips_error)
        black = black_level_psnr(scene.images[scene.i_test], 1.0 if cfg.render.white_bkgd else 0.0) if len(per_image) else None
        warning = black_warning(summary["psnr"], black, self.warmup_psnr, self.warmup_steps) if black is not None else None
        metrics = metrics_record(
            cfg, per_image, lpips_error, steps, stride, ckpt_path, summary=summary,
            train_seconds=train_seconds,
            # wall-clock seconds of this process: loading, the training loop (steps, periodic evaluations,
            # checkpoints), the final evaluation; a resumed run counts from its resume
            wall_seconds={**wall, "total": sum(wall.values())},
            # held-out rays rendered and scored per wall second of the final evaluation
            eval_rays_per_second=scored / wall["eval"] if scored and wall["eval"] > 0 else None,
            precond=cfg.train.precond,
            seed=cfg.train.seed,
            device=str(device),
            history=state.history + [{"step": steps, "train_seconds": train_seconds, "psnr": summary["psnr"],
                                      "train_psnr": self.train_psnr(), **work_record(rays_per_step),
                                      **sampler_record(renderer, rays_per_step)}],
            renderer=renderer.name,
            **rays_per_step.summary(),  # queries_per_ray (network queries per training ray), colour_skipped_per_ray, ...
            **sampler_record(renderer, rays_per_step),  # grid renderers: grid_occupied, grid_update_queries_per_ray
            kappa={k: list(v) for k, v in condition_numbers(self.fields["coarse"]).items()},
            kappa_history=state.kappa_history,  # [{step, layers: {name: [kappa_W, kappa_EW]}}] every kappa_every steps
            black_psnr=black,  # held-out PSNR of an image that is the background colour everywhere
            warnings=[warning] if warning else [],
        )
        atomic_write_json(out_dir / "metrics.json", metrics)  # a NaN or inf value is written as null
        return metrics


def trained_modules(fields: dict[str, NeRFField], appearance: Appearance | None) -> dict[str, torch.nn.Module]:
    """What a run optimises and checkpoints, by checkpoint name: the fields, then ``appearance``."""
    return {**fields, "appearance": appearance} if appearance is not None else dict(fields)


def prepare_run(cfg: RunConfig, data_root: Path = DATA_ROOT, payload: dict | None = None) -> NerfRun:
    """Seed, load the scene, build fields, optimizer, ray sampler, renderer (and its grid) and
    ray batch for ``cfg``; restored from a checkpoint ``payload`` when given."""
    tic = time.perf_counter()
    device = rank_device(select_device(cfg.train.device))  # distributed: cuda:LOCAL_RANK
    generator = seed_everything(cfg.train.seed)
    scene = load_scene(cfg.data, data_root, cfg.render.white_bkgd)
    fields = build_fields(cfg.field, device, cfg.render)
    appearance = Appearance(len(scene.i_train)).to(device) if cfg.train.appearance == "affine" else None
    modules = trained_modules(fields, appearance)
    visibility = (VisibilityLoss(scene, cfg.field, cfg.train.visibility_loss, cfg.train.visibility_views, device)
                  if cfg.train.visibility_loss > 0 else None)
    if cfg.render.gradient_scaling > 0 and scene.use_ndc:
        raise ConfigError("--gradient_scaling is a distance in the scene's world space; this scene renders in NDC "
                          "(forward-facing): add --no_ndc, or leave --gradient_scaling at 0", ("gradient_scaling",))
    optimizer = optimizer_from_config(modules.values(), cfg.train)
    loop = restore_loop_state(payload, modules, optimizer, generator)
    broadcast_parameters(modules.values())  # distributed: every rank starts from rank 0's weights
    sampler = RaySampler(scene, scene.i_train, cfg.train.n_rand, generator, device, cfg.train.precrop_frac,
                         patch=cfg.train.robust_patch if cfg.train.robust_trim > 0 else 0)
    if payload is not None:
        sampler.load_state_dict(payload["extra"]["sampler"])
    eval_views = scene.i_test if cfg.train.eval_views <= 0 else scene.i_test[: cfg.train.eval_views]
    # Renderer (and its occupancy grid, restored on resume); rays per step sized for a sample budget.
    saved_extra = payload["extra"] if payload is not None else {}
    renderer = build_renderer(cfg.render, device, state=renderer_state(saved_extra), extent=sampler.extent,
                              aabb=scene.aabb)
    rays_per_step = RaysPerStep.for_run(cfg, len(sampler), renderer.estimator.batch_by_samples)
    rays_per_step.load_state_dict(saved_extra.get("rays_per_step", saved_extra.get("ray_batch")))  # older: ray_batch
    return NerfRun(cfg, device, scene, fields, optimizer, generator, sampler, renderer, rays_per_step,
                   list(eval_views), loop, resumed=payload is not None, warmup_psnr=saved_extra.get("warmup_psnr"),
                   load_seconds=time.perf_counter() - tic, appearance=appearance, visibility=visibility)


def _resume_state(ckpt_path: Path, cfg: RunConfig) -> dict:
    """The checkpoint payload to resume from; CheckpointError (before anything is written) when
    it is another task's, or its scene or network differs from ``cfg``'s."""
    payload, saved = load_checkpoint(ckpt_path)
    if not isinstance(saved, RunConfig):
        raise CheckpointError(f"{ckpt_path}: a shape checkpoint; resume it with enerf shape train --resume")
    for f in dataclasses.fields(cfg.data):
        was, now = getattr(saved.data, f.name), getattr(cfg.data, f.name)
        if was != now:
            raise CheckpointError(f"--resume: {ckpt_path} was trained with data.{f.name} = {was!r}, not {now!r}; "
                                  "pass the same scene flags or use a new --expname")
    if saved.train.appearance != cfg.train.appearance:
        raise CheckpointError(f"--resume: {ckpt_path} was trained with --appearance {saved.train.appearance}, not "
                              f"{cfg.train.appearance}; pass the same or use a new --expname")
    if saved.field != cfg.field or saved.render.n_importance != cfg.render.n_importance:
        raise CheckpointError(
            f"{ckpt_path}: its network config differs from this run's; use a new --expname or the same settings"
        )
    return payload


def train_nerf(cfg: RunConfig, data_root: Path = DATA_ROOT, resume: bool = False, progress: bool = True,
               on_step=None) -> dict | None:
    """Train (or resume) one NeRF run; returns the final metrics dict (also in metrics.json),
    None on the ranks other than 0 of a run on several processes (``enerf.distributed``).

    Flags and the output folder are checked first; the run folder is locked (``RunLock``) from
    the first write to the last, and stale temp files of a killed run are removed. ``on_step``:
    the loop's step hook (``enerf train --viewer``; see ``train_loop``). With ``splat_seconds`` > 0 the
    run ends in splats (``enerf.train.splat_stage``)."""
    out_dir = config_run_folder(cfg)
    check_output_dir(out_dir, "--basedir")
    ckpt_path = out_dir / "checkpoints" / "latest.pt"
    payload = _resume_state(ckpt_path, cfg) if resume else None
    with process_group(cfg.train.device, cfg.train.dist_timeout, cfg.train.grad_reg):  # distributed: torchrun's env
        run = prepare_run(cfg, data_root, payload)
        run.progress = progress
        metrics = train_loop(run, out_dir, ckpt_path, progress, on_step)
    if metrics is not None and cfg.train.splat_seconds > 0:  # rank 0 of a run that finished: the splats
        from .splat_stage import splat_stage

        metrics = splat_stage(cfg, ckpt_path, metrics, data_root, progress)
    return metrics
