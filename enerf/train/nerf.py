"""The NeRF training loop: sample rays, render, MSE, Adam with exponential decay, evaluate.

One run writes into ``<basedir>/<expname>/``::

    config.json            the resolved RunConfig
    checkpoints/latest.pt  self-describing checkpoint (atomic write)
    metrics.json           held-out psnr / ssim / lpips, per_image, steps, train_seconds, ...
    test_views/            held-out renderings
    tb/                    TensorBoard scalars (loss, psnr, lr, kappa per layer)
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from ..checkpoint import atomic_write_json, load_checkpoint, save_checkpoint
from ..config import RunConfig, TrainConfig
from ..data.sampler import RaySampler, center_mask, training_rays
from ..data.scene import Scene
from ..errors import CheckpointError
from ..fields.nerf import NeRFField
from ..metrics import make_lpips, mse_to_psnr
from ..nn.conditioning import condition_numbers, conditioned_weights_once
from ..optim import PreconditionedOptimizer
from ..render import FieldFns, Renderer, build_renderer
from ..runfolder import RunLock, check_output_dir, remove_stale_temp_files
from ..validate import validate_run_config
from .components import build_fields, field_fns, load_scene, run_dir, select_device
from .divergence import FiniteGuard, black_level_psnr, black_warning
from .evaluate import evaluate_views, summarize, write_metrics
from .ray_batch import RayBatch
from .state import LoopState, optimizer_from_config, restore_loop_state, seed_everything

__all__ = ["train_nerf", "NerfRun", "prepare_run", "step_run", "training_step", "grid_record", "learning_rate", "set_learning_rate", "nerf_losses"]


def learning_rate(step: int, lrate: float, lrate_decay: float) -> float:
    """nerf-pytorch's schedule: lrate * 0.1 ** (step / (lrate_decay * 1000))."""
    return lrate * 0.1 ** (step / (lrate_decay * 1000))


def set_learning_rate(optimizer, step: int, train: TrainConfig) -> float:
    """Set every parameter group's rate for ``step``: the schedule's value times ``lrate_scale``
    times the group's own ``lr_scale`` (grids: encoding_lrate / lrate). Returns the trunk's rate."""
    lr = learning_rate(step, train.lrate, train.lrate_decay) * train.lrate_scale
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
    return lr


def nerf_losses(out: dict, target: torch.Tensor, fields: dict | None = None, tv_weight: float = 0.0) -> dict[str, torch.Tensor]:
    """Named loss terms: photometric MSE of the final pass and of the coarse pass if any, and
    ``tv_weight`` x the total variation of every field's learned position encoding (triplane)."""
    losses = {"mse": torch.mean((out["rgb"] - target) ** 2)}
    if "rgb_coarse" in out:
        losses["mse_coarse"] = torch.mean((out["rgb_coarse"] - target) ** 2)
    if tv_weight > 0 and fields:
        encodings = [f.pos_encoding for f in fields.values() if hasattr(f.pos_encoding, "total_variation")]
        if encodings:
            losses["tv"] = tv_weight * sum(e.total_variation() for e in encodings)
    return losses


def training_step(step: int, fields: dict, fns, renderer, sampler: RaySampler, ray_batch: RayBatch, optimizer,
                  generator: torch.Generator, center_only: bool = False,
                  tv_weight: float = 0.0) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """One optimizer step: grid update (grid renderers), a ray batch of ``ray_batch.n_rays``, render,
    loss (+ the optimizer's penalties), backward, step. Returns the named losses and their sum."""
    # One E W per layer for all of this step's passes; as a leaf whose gradient a hook carries
    # to W (cheaper on CPU) unless gradient regularization needs the whole graph.
    with conditioned_weights_once(*fields.values(), leaf_grads=optimizer.grad_reg == 0):
        renderer.update(step, fns, generator)  # occupancy grid, every grid_update_every steps
        sampler.batch_size = ray_batch.n_rays
        batch_rays, target = sampler.sample(center_only=center_only)
        out = renderer.render_rays(batch_rays, fns, train=True, generator=generator)
    ray_batch.record(target.shape[0], out["n_samples"], out["n_queries"])
    losses = nerf_losses(out, target, fields, tv_weight)
    losses.update(optimizer.penalties())
    loss = sum(losses.values())
    optimizer.zero_grad(set_to_none=True)
    optimizer.backward(loss)
    optimizer.step()
    return losses, loss


def grid_record(renderer, ray_batch: RayBatch) -> dict:
    """For grid renderers: the fraction of occupied cells and the points grid updates have sent
    to the field per training ray so far (not part of ``queries_per_ray``); {} otherwise."""
    grid = getattr(renderer, "grid", None)
    if grid is None:
        return {}
    return {"grid_occupied": float(grid.binaries.float().mean()),
            "grid_update_queries_per_ray": renderer.update_queries / max(ray_batch.rays, 1)}


@dataclass
class NerfRun:
    """Everything a NeRF training run steps with (``prepare_run``; ``step_run`` takes one step)."""

    cfg: RunConfig
    device: torch.device
    scene: Scene
    fields: dict[str, NeRFField]
    optimizer: PreconditionedOptimizer
    generator: torch.Generator
    sampler: RaySampler
    fns: FieldFns
    renderer: Renderer
    ray_batch: RayBatch
    eval_views: list[int]
    loop: LoopState


def prepare_run(cfg: RunConfig, data_root: Path = Path("data"), payload: dict | None = None) -> NerfRun:
    """Seed, load the scene, build fields, optimizer, ray sampler, renderer (and its grid) and
    ray batch for ``cfg``; restored from a checkpoint ``payload`` when given."""
    device = select_device(cfg.train.device)
    generator = seed_everything(cfg.train.seed)
    scene = load_scene(cfg.data, data_root, cfg.render.white_bkgd)
    fields = build_fields(cfg.field, with_fine=cfg.render.n_importance > 0, device=device)
    optimizer = optimizer_from_config(fields.values(), cfg.train)
    loop = restore_loop_state(payload, fields, optimizer, generator)
    rays, rgb = training_rays(scene, scene.i_train, device)
    mask = center_mask(len(scene.i_train), scene.height, scene.width, cfg.train.precrop_frac)
    sampler = RaySampler(rays, rgb, cfg.train.n_rand, generator, center_mask=mask)
    if payload is not None:
        sampler.load_state_dict(payload["extra"]["sampler"])
    eval_views = scene.i_test if cfg.train.eval_views <= 0 else scene.i_test[: cfg.train.eval_views]
    fns = field_fns(fields, cfg.render.raw_noise_std)
    # Renderer (and its occupancy grid, restored on resume); rays per step sized for a sample budget.
    saved_extra = payload["extra"] if payload is not None else {}
    renderer = build_renderer(cfg.render, device, state=saved_extra.get("estimator"), rays=rays, aabb=scene.aabb)
    ray_batch = RayBatch.for_run(cfg, len(sampler), renderer.name)
    ray_batch.load_state_dict(saved_extra.get("ray_batch"))
    return NerfRun(cfg, device, scene, fields, optimizer, generator, sampler, fns, renderer, ray_batch, list(eval_views), loop)


def step_run(run: NerfRun, step: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Training step ``step`` of ``run`` at its scheduled learning rate; returns (losses, loss)."""
    train = run.cfg.train
    for f in run.fields.values():
        f.train()
    set_learning_rate(run.optimizer, step, train)
    return training_step(step, run.fields, run.fns, run.renderer, run.sampler, run.ray_batch, run.optimizer,
                         run.generator, center_only=step < train.precrop_iters, tv_weight=train.tv_weight)


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
    if saved.field != cfg.field or saved.render.n_importance != cfg.render.n_importance:
        raise CheckpointError(
            f"{ckpt_path}: its network config differs from this run's; use a new --expname or the same settings"
        )
    return payload


def train_nerf(cfg: RunConfig, data_root: Path = Path("data"), resume: bool = False, progress: bool = True) -> dict:
    """Train (or resume) one NeRF run; returns the final metrics dict (also in metrics.json).

    Flags and the output folder are checked first; the run folder is locked (``RunLock``) from
    the first write to the last, and stale temp files of a killed run are removed."""
    validate_run_config(cfg)
    out_dir = run_dir(cfg)
    check_output_dir(out_dir, "--basedir")
    ckpt_path = out_dir / "checkpoints" / "latest.pt"
    payload = _resume_state(ckpt_path, cfg) if resume else None
    run = prepare_run(cfg, data_root, payload)
    with RunLock(out_dir, "enerf train"):
        remove_stale_temp_files(out_dir)
        return _train_locked(run, out_dir, ckpt_path, payload, progress)


def _train_locked(run: NerfRun, out_dir: Path, ckpt_path: Path, payload: dict | None, progress: bool) -> dict:
    """``train_nerf`` with the run folder locked: the loop, the final checkpoint and evaluation."""
    cfg = run.cfg
    scene, fields, optimizer, generator, sampler, renderer, ray_batch = (
        run.scene, run.fields, run.optimizer, run.generator, run.sampler, run.renderer, run.ray_batch)
    device, eval_views = run.device, run.eval_views
    loop = run.loop
    start_step, history, train_seconds, kappa_history = loop.start_step, loop.history, loop.train_seconds, loop.kappa_history
    warmup_steps = max(cfg.train.log_every, cfg.train.iters // 10)
    warmup_psnr = (payload or {}).get("extra", {}).get("warmup_psnr")
    atomic_write_json(out_dir / "config.json", cfg.to_dict())
    writer = SummaryWriter(log_dir=str(out_dir / "tb"))
    guard = FiniteGuard(((f"{n}.{k}", p) for n, f in fields.items() for k, p in f.named_parameters()), cfg.train.lrate)
    saved_step = start_step if payload is not None else None

    def checkpoint(step: int) -> None:
        nonlocal saved_step
        save_checkpoint(
            ckpt_path,
            cfg,
            step,
            {name: f.state_dict() for name, f in fields.items()},
            optimizer.state_dict(),
            extra={"generator": generator.get_state(), "sampler": sampler.state_dict(), "history": history, "train_seconds": train_seconds,
                   "kappa_history": kappa_history, "estimator": renderer.state_dict(), "ray_batch": ray_batch.state_dict(),
                   "warmup_psnr": warmup_psnr},
        )
        saved_step = step

    bar = tqdm(range(start_step, cfg.train.iters), initial=start_step, total=cfg.train.iters,
               disable=not progress, dynamic_ncols=True, desc=cfg.expname)
    done = start_step
    tic = time.perf_counter()
    for step in bar:
        losses, loss = step_run(run, step)
        lr = learning_rate(step, cfg.train.lrate, cfg.train.lrate_decay) * cfg.train.lrate_scale

        done = step + 1
        guard.check(done, loss, ckpt_path, saved_step)
        if done % cfg.train.log_every == 0 or done == cfg.train.iters:
            train_psnr = mse_to_psnr(losses["mse"].item())
            if done <= warmup_steps:
                warmup_psnr = train_psnr if warmup_psnr is None else max(train_psnr, warmup_psnr)
            bar.set_postfix(loss=f"{loss.item():.4f}", psnr=f"{train_psnr:.2f}")
            for name, value in losses.items():
                writer.add_scalar(f"train/{name}", value.item(), done)
            writer.add_scalar("train/psnr", train_psnr, done)
            writer.add_scalar("train/lr", lr, done)
        if cfg.train.kappa_every > 0 and (done % cfg.train.kappa_every == 0 or done == 1):
            kappas = condition_numbers(fields["coarse"])
            kappa_history.append({"step": done, "layers": {k: list(v) for k, v in kappas.items()}})
            for layer, (kappa_w, kappa_ew) in kappas.items():
                writer.add_scalar(f"kappa_W/{layer}", kappa_w, done)
                writer.add_scalar(f"kappa_EW/{layer}", kappa_ew, done)
        if cfg.train.eval_every > 0 and done % cfg.train.eval_every == 0 and done < cfg.train.iters:
            train_seconds += time.perf_counter() - tic
            per_image = evaluate_views(scene, eval_views, fields, cfg.render, device, renderer=renderer)
            psnr = float(np.mean([p["psnr"] for p in per_image]))
            history.append({"step": done, "train_seconds": train_seconds, "psnr": psnr,
                            "queries_per_ray": ray_batch.queries_per_ray, **grid_record(renderer, ray_batch)})
            writer.add_scalar("test/psnr", psnr, done)
            bar.write(f"step {done}: held-out PSNR {psnr:.2f} dB")
            tic = time.perf_counter()
            if cfg.train.stop_at_psnr > 0 and psnr >= cfg.train.stop_at_psnr:
                bar.write(f"held-out PSNR reached --stop_at_psnr {cfg.train.stop_at_psnr:g} dB at step {done}")
                break
        if cfg.train.ckpt_every > 0 and done % cfg.train.ckpt_every == 0 and done < cfg.train.iters:
            train_seconds += time.perf_counter() - tic
            checkpoint(done)
            tic = time.perf_counter()
        if cfg.train.time_budget > 0 and train_seconds + time.perf_counter() - tic >= cfg.train.time_budget:
            bar.write(f"time budget of {cfg.train.time_budget:.0f} s reached at step {done}")
            break
    bar.close()
    steps = done
    train_seconds += time.perf_counter() - tic
    checkpoint(steps)

    lpips_metric, lpips_error = make_lpips(device) if cfg.train.compute_lpips else (None, "disabled by config")
    per_image = evaluate_views(scene, scene.i_test, fields, cfg.render, device, lpips_metric, out_dir / "test_views",
                               renderer=renderer)
    summary = summarize(per_image, lpips_error)
    black = black_level_psnr(scene.images[scene.i_test], 1.0 if cfg.render.white_bkgd else 0.0) if len(per_image) else None
    warning = black_warning(summary["psnr"], black, warmup_psnr, warmup_steps) if black is not None else None
    metrics = {
        **summary,
        "per_image": per_image,
        "steps": steps,
        "train_seconds": train_seconds,
        "conditioning": cfg.field.conditioning,
        "precond": cfg.train.precond,
        "conditioned_layers": cfg.field.conditioned_layers,
        "seed": cfg.train.seed,
        "device": str(device),
        "history": history + [{"step": steps, "train_seconds": train_seconds, "psnr": summarize(per_image, None)["psnr"],
                               "queries_per_ray": ray_batch.queries_per_ray, **grid_record(renderer, ray_batch)}],
        "renderer": renderer.name,
        **ray_batch.summary(),  # queries_per_ray (network queries per training ray), samples_per_ray, rays_per_step
        **grid_record(renderer, ray_batch),  # grid renderers: grid_occupied, grid_update_queries_per_ray
        "kappa": {k: list(v) for k, v in condition_numbers(fields["coarse"]).items()},
        "kappa_history": kappa_history,  # [{step, layers: {name: [kappa_W, kappa_EW]}}] every kappa_every steps
        "checkpoint": str(ckpt_path),
        "black_psnr": black,  # held-out PSNR of an image that is the background colour everywhere
        "warnings": [warning] if warning else [],
    }
    writer.add_scalar("test/psnr", metrics["psnr"], steps)
    writer.close()
    write_metrics(out_dir / "metrics.json", metrics)
    return metrics
