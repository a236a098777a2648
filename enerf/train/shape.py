"""Fit an occupancy or SDF network to one mesh, extract its surface, score it.

One run writes into ``<basedir>/<expname>/`` (the NeRF trainer's layout)::

    config.json            the resolved ShapeRunConfig
    checkpoints/latest.pt  self-describing checkpoint, task "shape" (atomic write)
    metrics.json           iou, chamfer_l1, normal_consistency, fscore, steps, train_seconds,
                           conditioning, seed, history, ...
    mesh_<R>.ply           the surface the metrics were computed on (marching cubes, R^3)
    tb/                    TensorBoard scalars (loss terms, lr, IoU, kappa per layer)

Losses (a dict of named terms, summed): occupancy: ``bce`` (binary cross-entropy on logits,
Occupancy Networks); SDF: ``l1`` = mean |clamp(f, -d, d) - clamp(s, -d, d)| (DeepSDF, d =
``sdf_clamp``) and, when ``eikonal_weight`` > 0, ``eikonal`` = w · mean (|∇f| - 1)^2 over
the batch (IGR / SIREN).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import torch
import trimesh
from torch import Tensor
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from ..checkpoint import atomic_write_bytes, atomic_write_json, load_checkpoint, save_checkpoint
from ..config import ShapeDataConfig, ShapeRunConfig
from ..data.mesh import MeshSamples, cached_samples, normalize_mesh, sample_eval_points, sample_training_points, volume_box
from ..data.shapes import load_shape
from ..errors import CheckpointError, EnerfError
from ..export.isosurface import isosurface, query_grid
from ..fields.shape import ISO_LEVEL, ShapeField
from ..metrics import shape_metrics, volumetric_iou
from ..nn.conditioning import condition_numbers
from ..runfolder import RunLock, check_output_dir, check_output_file, remove_stale_temp_files
from .components import select_device
from .divergence import FiniteGuard
from .evaluate import read_metrics
from .state import optimizer_from_config, restore_loop_state, seed_everything

__all__ = [
    "ShapeData",
    "load_shape_data",
    "shape_losses",
    "shape_learning_rate",
    "extract_mesh",
    "evaluate_shape",
    "train_shape",
    "evaluate_shape_checkpoint",
    "mesh_from_checkpoint",
]


class ShapeData:
    """The normalised ground-truth mesh, its labelled training points and its IoU points."""

    def __init__(self, mesh: trimesh.Trimesh, train: MeshSamples, evaluation: MeshSamples, bbox) -> None:
        self.mesh, self.train, self.evaluation = mesh, train, evaluation
        self.bbox_min, self.bbox_max = bbox


def load_shape_data(cfg: ShapeDataConfig, eval_points: int) -> ShapeData:
    """Load + normalise ``cfg.mesh`` and sample (or read from the cache) its labelled points."""
    mesh = normalize_mesh(load_shape(cfg.mesh))
    name = cfg.mesh
    common = {"padding": cfg.padding, "seed": cfg.sample_seed, "allow_open": cfg.allow_open, "version": 1}
    train_settings = {**common, "set": "train", "n_uniform": cfg.n_uniform, "n_near": cfg.n_near,
                      "near_sigmas": list(cfg.near_sigmas)}
    train = cached_samples(cfg.cache_dir, mesh, train_settings, lambda: sample_training_points(
        mesh, cfg.n_uniform, cfg.n_near, tuple(cfg.near_sigmas), cfg.padding, cfg.sample_seed, cfg.allow_open, name))
    eval_settings = {**common, "set": "eval", "n": eval_points}
    evaluation = cached_samples(cfg.cache_dir, mesh, eval_settings, lambda: sample_eval_points(
        mesh, eval_points, cfg.padding, cfg.sample_seed + 1000, cfg.allow_open, name))
    return ShapeData(mesh, train, evaluation, volume_box(cfg.padding))


def shape_learning_rate(step: int, lrate: float, lrate_decay: int) -> float:
    """lrate * 0.1 ** (step / lrate_decay); constant when lrate_decay is 0."""
    return lrate if lrate_decay <= 0 else lrate * 0.1 ** (step / lrate_decay)


def shape_losses(
    field: ShapeField, points: Tensor, occupancy: Tensor, sdf: Tensor, sdf_clamp: float, eikonal_weight: float
) -> dict[str, Tensor]:
    """Named loss terms of one batch.

    Args:
        points: Tensor  # [n, 3]; occupancy: Tensor  # [n] in {0, 1}; sdf: Tensor  # [n]
    """
    if field.kind == "occupancy":
        return {"bce": torch.nn.functional.binary_cross_entropy_with_logits(field(points), occupancy)}
    need_grad = eikonal_weight > 0
    if need_grad:
        points = points.detach().requires_grad_(True)
    pred = field(points)
    losses = {"l1": (pred.clamp(-sdf_clamp, sdf_clamp) - sdf.clamp(-sdf_clamp, sdf_clamp)).abs().mean()}
    if need_grad:
        (grad,) = torch.autograd.grad(pred.sum(), points, create_graph=True)
        losses["eikonal"] = eikonal_weight * ((grad.norm(dim=-1) - 1.0) ** 2).mean()
    return losses


def extract_mesh(
    field: ShapeField, bbox_min, bbox_max, resolution: int, device: torch.device, chunk: int = 65536
) -> trimesh.Trimesh:
    """Marching cubes of the field's surface (level 0.5 of the occupancy probability, or 0 of
    the SDF) on a ``resolution``^3 grid over the box; faces wound with outward normals."""
    field.eval()
    level, inside = ISO_LEVEL[field.kind]
    values = query_grid(field.surface_value, bbox_min, bbox_max, resolution, chunk=chunk, device=device)
    vertices, faces = isosurface(values, bbox_min, bbox_max, level, inside=inside)
    return trimesh.Trimesh(vertices, faces, process=False)


@torch.no_grad()
def _predict_inside(field: ShapeField, points: np.ndarray, device: torch.device, chunk: int) -> np.ndarray:
    field.eval()
    out = []
    for lo in range(0, len(points), chunk):
        x = torch.tensor(points[lo : lo + chunk], dtype=torch.float32, device=device)  # a copy
        out.append(field.inside(x).cpu().numpy())
    return np.concatenate(out)


def evaluate_shape(
    field: ShapeField, data: ShapeData, cfg: ShapeRunConfig, device: torch.device, surface: bool = True
) -> tuple[dict, trimesh.Trimesh | None]:
    """IoU on the evaluation points and, with ``surface``, the mesh metrics of the extracted
    surface (None, with ``mesh_error``, when the field has no surface in the box)."""
    t = cfg.train
    iou = volumetric_iou(_predict_inside(field, data.evaluation.points, device, t.chunk), data.evaluation.occupancy > 0.5)
    metrics: dict = {"iou": iou}
    if not surface:
        return metrics, None
    tic = time.perf_counter()
    try:
        mesh = extract_mesh(field, data.bbox_min, data.bbox_max, t.mesh_resolution, device, t.chunk)
    except EnerfError as exc:
        metrics.update({"chamfer_l1": None, "normal_consistency": None, "fscore": None, "mesh_error": str(exc)})
        return metrics, None
    metrics["mesh_seconds"] = time.perf_counter() - tic
    metrics.update(shape_metrics(mesh, data.mesh, t.surface_points, t.fscore_tau, seed=cfg.data.sample_seed))
    return metrics, mesh


def _write_mesh(path: Path, mesh: trimesh.Trimesh) -> None:
    data = mesh.export(file_type=path.suffix.lower().lstrip("."))
    atomic_write_bytes(path, data.encode("utf-8") if isinstance(data, str) else data)  # obj / off are text


def _finite(value: float) -> float | None:
    """A condition number for JSON: None where it is infinite (a singular weight)."""
    return value if math.isfinite(value) else None


def _finish(field, data, cfg, device, out_dir, steps, train_seconds, history, ckpt_path, kappa_history) -> dict:
    metrics, mesh = evaluate_shape(field, data, cfg, device)
    final = {"step": steps, "train_seconds": train_seconds, "iou": metrics["iou"], "chamfer_l1": metrics["chamfer_l1"]}
    metrics.update({
        "steps": steps,
        "train_seconds": train_seconds,
        "kind": cfg.field.kind,
        "mesh": cfg.data.mesh,
        "conditioning": cfg.field.conditioning,
        "conditioned_layers": cfg.field.conditioned_layers,
        "seed": cfg.train.seed,
        "device": str(device),
        "mesh_resolution": cfg.train.mesh_resolution,
        "history": [h for h in history if h["step"] != steps] + [final],
        "kappa": {k: [_finite(a), _finite(b)] for k, (a, b) in condition_numbers(field).items()},
        "kappa_history": kappa_history,  # [{step, layers: {name: [kappa_W, kappa_EW]}}] every kappa_every steps
        "precond": cfg.train.precond,
        "checkpoint": str(ckpt_path),
    })
    if mesh is not None:
        mesh_path = out_dir / f"mesh_{cfg.train.mesh_resolution}.ply"
        _write_mesh(mesh_path, mesh)
        metrics["mesh_file"] = str(mesh_path)
    atomic_write_json(out_dir / "metrics.json", metrics)
    return metrics


def train_shape(cfg: ShapeRunConfig, resume: bool = False, progress: bool = True) -> dict:
    """Train (or resume) one shape run; returns the final metrics (also in metrics.json).

    Flags and output folders are checked first, the run folder is locked (``RunLock``) while
    it is written, and stale temp files of a killed run are removed."""
    device = select_device(cfg.train.device)
    out_dir = Path(cfg.basedir) / cfg.expname
    check_output_dir(out_dir, "--basedir")
    check_output_dir(cfg.data.cache_dir, "--cache_dir")
    ckpt_path = out_dir / "checkpoints" / "latest.pt"
    payload = None
    if resume:
        payload, saved = load_checkpoint(ckpt_path)
        if not isinstance(saved, ShapeRunConfig) or saved.field != cfg.field or saved.data != cfg.data:
            raise CheckpointError(f"{ckpt_path}: its mesh or network config differs from this run's; "
                                  "use a new --expname or the same settings")
    generator = seed_everything(cfg.train.seed)
    data = load_shape_data(cfg.data, cfg.train.eval_points)
    field = ShapeField.from_config(cfg.field).to(device)
    optimizer = optimizer_from_config(field, cfg.train)
    loop = restore_loop_state(payload, {"field": field}, optimizer, generator)
    with RunLock(out_dir, "enerf shape train"):
        remove_stale_temp_files(out_dir)
        return _train_shape_locked(cfg, data, field, optimizer, generator, loop, device, out_dir, ckpt_path,
                                   payload is not None, progress)


def _train_shape_locked(cfg, data, field, optimizer, generator, loop, device, out_dir: Path, ckpt_path: Path,
                        resumed: bool, progress: bool) -> dict:
    """``train_shape`` with the run folder locked: the loop, the final checkpoint, the metrics."""
    start_step, history, train_seconds, kappa_history = loop.start_step, loop.history, loop.train_seconds, loop.kappa_history
    atomic_write_json(out_dir / "config.json", cfg.to_dict())
    guard = FiniteGuard(field.named_parameters(), cfg.train.lrate)
    saved_step = start_step if resumed else None
    points = torch.from_numpy(data.train.points.copy()).to(device)  # copies: the samples stay read-only
    occupancy = torch.from_numpy(data.train.occupancy.copy()).to(device)
    sdf = torch.from_numpy(data.train.sdf.copy()).to(device)
    writer = SummaryWriter(log_dir=str(out_dir / "tb"))
    t = cfg.train

    def checkpoint(step: int) -> None:
        nonlocal saved_step
        save_checkpoint(ckpt_path, cfg, step, {"field": field.state_dict()}, optimizer.state_dict(),
                        extra={"generator": generator.get_state(), "history": history, "train_seconds": train_seconds,
                               "kappa_history": kappa_history})
        saved_step = step

    bar = tqdm(range(start_step, t.iters), initial=start_step, total=t.iters, disable=not progress,
               dynamic_ncols=True, desc=cfg.expname)
    done = start_step
    tic = time.perf_counter()
    for step in bar:
        field.train()
        lr = shape_learning_rate(step, t.lrate, t.lrate_decay)
        for group in optimizer.param_groups:
            group["lr"] = lr
        idx = torch.randint(len(points), (t.batch_size,), generator=generator).to(device)
        losses = shape_losses(field, points[idx], occupancy[idx], sdf[idx], t.sdf_clamp, t.eikonal_weight)
        losses.update(optimizer.penalties())
        loss = sum(losses.values())
        optimizer.zero_grad(set_to_none=True)
        optimizer.backward(loss)
        optimizer.step()
        done = step + 1
        guard.check(done, loss, ckpt_path, saved_step)
        if done % t.log_every == 0 or done == t.iters:
            bar.set_postfix(loss=f"{loss.item():.4g}")
            for name, value in losses.items():
                writer.add_scalar(f"train/{name}", value.item(), done)
            writer.add_scalar("train/lr", lr, done)
        if t.kappa_every > 0 and (done % t.kappa_every == 0 or done == 1):
            kappas = condition_numbers(field)
            for layer, (kappa_w, kappa_ew) in kappas.items():
                writer.add_scalar(f"kappa_W/{layer}", kappa_w, done)
                writer.add_scalar(f"kappa_EW/{layer}", kappa_ew, done)
            kappa_history.append({"step": done, "layers": {k: [_finite(a), _finite(b)] for k, (a, b) in kappas.items()}})
        if t.eval_every > 0 and done % t.eval_every == 0 and done < t.iters:
            train_seconds += time.perf_counter() - tic
            m, _ = evaluate_shape(field, data, cfg, device, surface=cfg.field.kind == "sdf")
            entry = {"step": done, "train_seconds": train_seconds, "iou": m["iou"]}
            if "chamfer_l1" in m:
                entry["chamfer_l1"] = m["chamfer_l1"]
            history.append(entry)
            for key in ("iou", "chamfer_l1"):
                if entry.get(key) is not None:
                    writer.add_scalar(f"eval/{key}", entry[key], done)
            bar.write(f"step {done}: " + "  ".join(f"{k} {v:.4f}" for k, v in entry.items()
                                                  if k in ("iou", "chamfer_l1") and v is not None))
            tic = time.perf_counter()
        if t.ckpt_every > 0 and done % t.ckpt_every == 0 and done < t.iters:
            train_seconds += time.perf_counter() - tic
            checkpoint(done)
            tic = time.perf_counter()
        if t.time_budget > 0 and train_seconds + time.perf_counter() - tic >= t.time_budget:
            bar.write(f"time budget of {t.time_budget:.0f} s reached at step {done}")
            break
    bar.close()
    train_seconds += time.perf_counter() - tic
    checkpoint(done)
    metrics = _finish(field, data, cfg, device, out_dir, done, train_seconds, history, ckpt_path, kappa_history)
    writer.add_scalar("eval/iou", metrics["iou"], done)
    writer.close()
    return metrics


def _load_field(ckpt: str | Path, device_name: str | None) -> tuple[ShapeField, ShapeRunConfig, dict, torch.device]:
    payload, cfg = load_checkpoint(ckpt)
    if not isinstance(cfg, ShapeRunConfig):
        raise CheckpointError(f"{ckpt}: a NeRF checkpoint; `enerf shape` needs one written by `enerf shape train`")
    device = select_device(device_name or cfg.train.device)
    field = ShapeField.from_config(cfg.field).to(device)
    try:
        field.load_state_dict(payload["models"]["field"])
    except (KeyError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{ckpt}: its 'field' weights do not fit its config ({first})") from None
    return field, cfg, payload, device


def evaluate_shape_checkpoint(ckpt: str | Path, device_name: str | None = None) -> dict:
    """Recompute ``metrics.json`` (and the mesh it scores) from a checkpoint alone."""
    field, cfg, payload, device = _load_field(ckpt, device_name)
    out_dir = check_output_dir(Path(ckpt).resolve().parent.parent, "--ckpt's run folder")
    read_metrics(out_dir / "metrics.json")  # a corrupt one is reported before any work
    data = load_shape_data(cfg.data, cfg.train.eval_points)
    extra = payload.get("extra", {})
    with RunLock(out_dir, "enerf shape eval"):
        return _finish(field, data, cfg, device, out_dir, payload["step"], extra.get("train_seconds", 0.0),
                       extra.get("history", []), Path(ckpt), extra.get("kappa_history", []))


def mesh_from_checkpoint(
    ckpt: str | Path, resolution: int, out: str | Path | None = None, device_name: str | None = None
) -> tuple[Path, trimesh.Trimesh, float]:
    """Extract the surface at ``resolution``^3 and write it (default ``<run>/mesh_<R>.ply``).

    Returns (path, mesh, seconds spent on grid queries + marching cubes).
    """
    field, cfg, _, device = _load_field(ckpt, device_name)
    path = Path(out) if out else Path(ckpt).resolve().parent.parent / f"mesh_{resolution}.ply"
    if path.suffix.lower() not in (".ply", ".obj", ".off", ".stl", ".glb"):
        raise EnerfError(f"--out {path}: choose a .ply, .obj, .off, .stl or .glb file name")
    check_output_file(path, "--out")
    lo, hi = volume_box(cfg.data.padding)
    tic = time.perf_counter()
    mesh = extract_mesh(field, lo, hi, resolution, device, cfg.train.chunk)
    seconds = time.perf_counter() - tic
    _write_mesh(path, mesh)
    return path, mesh, seconds
