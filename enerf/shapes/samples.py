"""The labelled points a shape run trains and is scored on: the normalised ground-truth mesh,
its training points (occupancy + signed distance) and its IoU points, cached on disk."""

from __future__ import annotations

import trimesh

from ..config import ShapeDataConfig
from .mesh import MeshSamples, cached_samples, normalize_mesh, sample_eval_points, sample_training_points, volume_box
from .builtin import load_shape

__all__ = ["ShapeData", "load_shape_data"]


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
