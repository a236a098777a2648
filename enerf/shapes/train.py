"""Fit an occupancy or SDF network to one mesh, extract its surface, score it.

One run writes into ``<basedir>/<expname>/`` (the NeRF trainer's layout)::

    config.json            the resolved ShapeRunConfig
    checkpoints/latest.pt  self-describing checkpoint, task "shape" (atomic write)
    metrics.json           iou, chamfer_l1, normal_consistency, fscore, steps, train_seconds,
                           conditioning, seed, history, ...
    mesh_<R>.ply           the surface the metrics were computed on (marching cubes, R^3)
    tb/                    TensorBoard scalars (loss terms, lr, IoU, kappa per layer)

The loop is ``enerf.train.loop``; the loss terms are ``enerf.shapes.losses.shape_losses``, the
labelled points ``enerf.shapes.samples``, the meshing ``enerf.shapes.extract``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import trimesh
from torch import Tensor

from ..atomic import atomic_write_json, json_safe
from ..checkpoint import load_checkpoint
from ..config import ShapeRunConfig
from ..errors import CheckpointError, EnerfError
from ..export.isosurface import save_mesh
from ..loaded_run import load_run, select_device
from ..metrics import shape_metrics, volumetric_iou
from ..nn.conditioning import condition_numbers
from ..nn.modes import eval_mode
from ..optim import PreconditionedOptimizer
from ..rng import seed_everything
from ..runfolder import RunLock, check_output_dir, config_run_folder
from ..distributed import average_gradients
from ..runfolder import read_metrics
from ..train.loop import Evaluation, StepResult, train_loop
from ..train.state import LoopState, optimizer_from_config, restore_loop_state, set_learning_rates
from .extract import extract_mesh, mesh_from_checkpoint
from ..fields.shape import ShapeField
from .losses import shape_losses
from .samples import ShapeData, load_shape_data

__all__ = [
    "ShapeRun",
    "evaluate_shape",
    "train_shape",
    "evaluate_shape_checkpoint",
    "mesh_from_checkpoint",  # enerf.shapes.extract's, here for ``enerf shape mesh``
]


@torch.no_grad()
def _predict_inside(field: ShapeField, points: np.ndarray, device: torch.device, chunk: int) -> np.ndarray:
    out = []
    with eval_mode([field]):
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
        "kappa": {k: json_safe(v) for k, v in condition_numbers(field).items()},  # inf (singular) -> None
        "kappa_history": kappa_history,  # [{step, layers: {name: [kappa_W, kappa_EW]}}] every kappa_every steps
        "precond": cfg.train.precond,
        "checkpoint": str(ckpt_path),
    })
    if mesh is not None:
        mesh_path = out_dir / f"mesh_{cfg.train.mesh_resolution}.ply"
        save_mesh(mesh_path, mesh)
        metrics["mesh_file"] = str(mesh_path)
    atomic_write_json(out_dir / "metrics.json", metrics)
    return metrics


@dataclass
class ShapeRun:
    """A shape training run: the field, its labelled points and optimizer, and the methods the
    training loop (``enerf.train.loop``) calls."""

    cfg: ShapeRunConfig
    device: torch.device
    data: ShapeData
    field: ShapeField
    optimizer: PreconditionedOptimizer
    generator: torch.Generator
    loop: LoopState
    resumed: bool = False

    command = "enerf shape train"
    final_scalar = ("eval/iou", "iou")

    def __post_init__(self) -> None:
        train = self.data.train  # copies: the samples stay read-only
        self.points = torch.from_numpy(train.points.copy()).to(self.device)  # [n, 3]
        self.occupancy = torch.from_numpy(train.occupancy.copy()).to(self.device)  # [n]
        self.sdf = torch.from_numpy(train.sdf.copy()).to(self.device)  # [n]

    def step(self, step: int, progress: float = 0.0) -> StepResult:
        """Training step ``step``: a batch of ``batch_size`` labelled points drawn with replacement,
        its loss terms, one update."""
        t, optimizer = self.cfg.train, self.optimizer
        lr = set_learning_rates(optimizer, t, step, progress)
        idx = torch.randint(len(self.points), (t.batch_size,), generator=self.generator).to(self.device)
        losses = {**shape_losses(self.field, self.points[idx], self.occupancy[idx], self.sdf[idx], t.sdf_clamp,
                                 t.eikonal_weight), **optimizer.penalties()}
        loss = sum(losses.values())
        optimizer.zero_grad(set_to_none=True)
        optimizer.backward(loss)
        average_gradients(optimizer.params, 1.0)  # distributed: every process trains on its own full batch
        optimizer.step()
        return StepResult(losses, loss, lr)

    def named_parameters(self):
        return self.field.named_parameters()

    def log(self, step: int, losses: dict, loss: Tensor) -> tuple[dict[str, str], dict[str, float]]:
        return {"loss": f"{loss.item():.4g}"}, {}

    def kappa_module(self) -> ShapeField:
        return self.field

    def evaluate(self, step: int) -> Evaluation:
        """IoU, and for SDF fields the Chamfer distance of the extracted surface."""
        m, _ = evaluate_shape(self.field, self.data, self.cfg, self.device, surface=self.cfg.field.kind == "sdf")
        record = {"iou": m["iou"]}
        if "chamfer_l1" in m:
            record["chamfer_l1"] = m["chamfer_l1"]
        shown = {k: v for k, v in record.items() if v is not None}
        return Evaluation(record, {f"eval/{k}": v for k, v in shown.items()},
                          "  ".join(f"{k} {v:.4f}" for k, v in shown.items()))

    def checkpoint_fields(self) -> dict[str, dict]:
        return {"field": self.field.state_dict()}

    def checkpoint_extras(self) -> dict:
        return {}

    def finish(self, state: LoopState, out_dir: Path, ckpt_path: Path) -> dict:
        """Score the final field and its surface (mesh_<R>.ply), write metrics.json."""
        return _finish(self.field, self.data, self.cfg, self.device, out_dir, state.step, state.train_seconds,
                       state.history, ckpt_path, state.kappa_history)


def train_shape(cfg: ShapeRunConfig, resume: bool = False, progress: bool = True) -> dict:
    """Train (or resume) one shape run; returns the final metrics (also in metrics.json).

    Flags and output folders are checked first, the run folder is locked (``RunLock``) while
    it is written, and stale temp files of a killed run are removed."""
    device = select_device(cfg.train.device)
    out_dir = config_run_folder(cfg)
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
    field = ShapeField(cfg.field).to(device)
    optimizer = optimizer_from_config(field, cfg.train)
    loop = restore_loop_state(payload, {"field": field}, optimizer, generator)
    run = ShapeRun(cfg, device, data, field, optimizer, generator, loop, resumed=payload is not None)
    return train_loop(run, out_dir, ckpt_path, progress)


def evaluate_shape_checkpoint(ckpt: str | Path, device_name: str | None = None) -> dict:
    """Recompute ``metrics.json`` (and the mesh it scores) from a checkpoint alone."""
    run = load_run(ckpt, device_name=device_name, task="shape")
    out_dir = check_output_dir(run.folder, "--ckpt's run folder")
    read_metrics(out_dir / "metrics.json")  # a corrupt one is reported before any work
    data = load_shape_data(run.cfg.data, run.cfg.train.eval_points)
    extra = run.extra
    with RunLock(out_dir, "enerf shape eval"):
        return _finish(run.fields["field"], data, run.cfg, run.device, out_dir, run.step, extra.get("train_seconds", 0.0),
                       extra.get("history", []), run.ckpt_path, extra.get("kappa_history", []))
