"""The estimator registry: a new sampler is one class and one line in ``ESTIMATORS`` (plus its
name among the ``--renderer`` choices), and nothing else in training or rendering asks which
estimator a run has."""

from __future__ import annotations

import dataclasses
from typing import Literal, get_args

import torch

from enerf.config import SAMPLERS, RenderConfig
from enerf.render import ESTIMATORS, Estimator, Samples


class UniformEstimator(Estimator):
    """A toy sampler: ``n_samples // 2`` samples per ray, evenly spaced over [near, far] (interval
    midpoints, no jitter); counts the training steps it was updated at."""

    name = "uniform"
    updated: list[int] = []

    def sample(self, rays, fields, train, generator=None) -> Samples:
        n = self.cfg.n_samples // 2
        u = (torch.arange(n, dtype=rays.near.dtype) + 0.5) / n  # [n]
        return Samples(t=rays.near + (rays.far - rays.near) * u)  # [n_rays, n]

    def update(self, step, fields, generator=None) -> None:
        UniformEstimator.updated.append(step)


def _with_choice(monkeypatch, name: str) -> None:
    """``name`` among RenderConfig.sampler's choices (what adding it to ``SamplerName`` does)."""
    field = next(f for f in dataclasses.fields(RenderConfig) if f.name == "sampler")
    monkeypatch.setattr(field, "type", Literal[(*get_args(field.type), name)])


def test_the_registry_names_every_renderer_choice():
    assert set(ESTIMATORS) == set(SAMPLERS)
    assert all(issubclass(cls, Estimator) for cls in ESTIMATORS.values())


def test_a_toy_sampler_trains_and_renders_through_the_registry(monkeypatch, scene_dir, tmp_path, train_metrics):
    monkeypatch.setitem(ESTIMATORS, "uniform", UniformEstimator)
    _with_choice(monkeypatch, "uniform")
    UniformEstimator.updated = []
    metrics = train_metrics(scene_dir, tmp_path, "toy", 6, "--renderer", "uniform", "--N_samples", "8",
                            "--N_importance", "0", "--netdepth", "2", "--netwidth", "16", "--view_width", "8",
                            "--multires", "2", "--multires_views", "1", "--N_rand", "64", "--video", "none",
                            "--eval_views", "1", "--eval_stride", "4", "--no_lpips", "--quiet")
    assert metrics["renderer"] == "uniform" and metrics["steps"] == 6
    assert UniformEstimator.updated == list(range(6))  # the step asked the estimator, every step
    # 4 samples per ray (the hierarchical estimator would have taken 8): the toy rendered the batches
    assert metrics["queries_per_ray"] == 4.0
    assert 0.0 < metrics["psnr"] < 60.0
