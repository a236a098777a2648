"""``enerf.loaded_run`` (a run from its checkpoint alone) and ``enerf.train.loop`` (the shared loop)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import enerf.train.loop as loop_module
from enerf.checkpoint import load_checkpoint, save_checkpoint
from enerf.config import ShapeFieldConfig, ShapeRunConfig, ShapeTrainConfig, TrainConfig
from enerf.errors import CheckpointError
from enerf.fields.shape import ShapeField
from enerf.optim import build_optimizer
from enerf.loaded_run import load_run
from enerf.runfolder import checkpoint_run_folder, config_run_folder
from enerf.train.loop import Evaluation, StepResult, Stopwatch, train_loop
from enerf.train.state import cooldown_factor, learning_rate, set_learning_rates, training_progress
from enerf.train.state import LoopState


def _shape_cfg(tmp: Path, width: int = 8, **train) -> ShapeRunConfig:
    return ShapeRunConfig(expname="toy", basedir=str(tmp / "base"),
                          field=ShapeFieldConfig(netdepth=2, netwidth=width, skips=(), multires=2),
                          train=ShapeTrainConfig(device="cpu", **train))


def test_load_run_rebuilds_a_shape_run_wherever_it_was_moved(tmp_path):
    torch.manual_seed(0)
    cfg = _shape_cfg(tmp_path)
    field = ShapeField(cfg.field)
    ckpt = tmp_path / "moved" / "checkpoints" / "latest.pt"
    save_checkpoint(ckpt, cfg, 7, {"field": field.state_dict()}, None, extra={"train_seconds": 1.5})

    run = load_run(ckpt)
    assert run.task == "shape" and run.step == 7 and run.renderer is None and run.scene is None
    assert run.folder == (tmp_path / "moved").resolve() and run.extra["train_seconds"] == 1.5
    assert not run.fields["field"].training
    x = torch.rand(64, 3) * 2 - 1
    with torch.no_grad():
        torch.testing.assert_close(run.fields["field"](x), field.eval()(x), rtol=0, atol=0)
    with pytest.raises(CheckpointError, match="is a shape checkpoint"):
        load_run(ckpt, task="nerf")

    # A checkpoint outside a checkpoints/ folder belongs to the folder its config names.
    loose = tmp_path / "loose.pt"
    save_checkpoint(loose, cfg, 7, {"field": field.state_dict()})
    assert checkpoint_run_folder(loose, cfg) == config_run_folder(cfg) == tmp_path / "base" / "toy"


def test_load_run_refuses_weights_of_another_network(tmp_path):
    cfg = _shape_cfg(tmp_path, width=8)
    narrow = ShapeField(cfg.field)
    ckpt = tmp_path / "run" / "checkpoints" / "latest.pt"
    save_checkpoint(ckpt, _shape_cfg(tmp_path, width=16), 1, {"field": narrow.state_dict()})
    with pytest.raises(CheckpointError, match="weights of 'field' do not fit"):
        load_run(ckpt)


def test_learning_rates_follow_the_schedule_the_groups_and_the_cooldown():
    """state.learning_rate against its closed form: nerf-pytorch's decay (thousands of steps),
    lrate_scale, a group's scale, the cooldown over the last fraction; decay 0 is constant."""
    train = TrainConfig(lrate=1e-3, lrate_decay=2, lrate_scale=0.5, lrate_cooldown=0.25)
    assert learning_rate(train, 1000, scale=train.rate_scale()) == pytest.approx(0.5 * 1e-3 * 10 ** -0.5)
    assert learning_rate(train, 1000, progress=0.5, scale=20.0) == pytest.approx(20 * 1e-3 * 10 ** -0.5)
    assert learning_rate(train, 1000, progress=0.875, scale=0.5) == pytest.approx(0.5 * 1e-3 * 10 ** -0.5 * 10 ** -0.5)
    assert learning_rate(train, 1000, progress=1.0, scale=0.5) == pytest.approx(0.5 * 1e-4 * 10 ** -0.5)
    grid = TrainConfig(lrate=1e-3, encoding_lrate=2e-2, lrate_scale=0.5)
    assert grid.rate_scale("field.pos_encoding.planes") == pytest.approx(10.0)
    assert grid.rate_scale("field.levels.0.pos_encoding.planes") == pytest.approx(10.0)
    assert grid.rate_scale("field.trunk.0.weight") == grid.rate_scale() == 0.5
    assert ShapeTrainConfig().rate_scale("field.pos_encoding.planes") == 1.0
    assert learning_rate(ShapeTrainConfig(lrate=3e-4, lrate_decay=0), 10 ** 6) == 3e-4
    assert learning_rate(ShapeTrainConfig(lrate=3e-4, lrate_decay=10), 5000) == pytest.approx(3e-4 * 10 ** -0.5)
    net = nn.Linear(3, 1)
    opt = build_optimizer(net, lr=1.0, lr_scale=lambda name: train.rate_scale(name) * (4.0 if name == "bias" else 1.0))
    assert set_learning_rates(opt, train, 1000) == pytest.approx(0.5 * 1e-3 * 10 ** -0.5)
    assert sorted(g["lr"] for g in opt.param_groups) == pytest.approx([0.5e-3 * 10 ** -0.5, 2e-3 * 10 ** -0.5])


def test_stopwatch_does_not_count_paused_time(monkeypatch):
    now = iter([10.0, 12.0, 30.0, 31.0, 35.0])  # start, pause, resume, read, stop
    monkeypatch.setattr(loop_module.time, "perf_counter", lambda: next(now))
    clock = Stopwatch(100.0)
    with clock.paused():
        pass
    assert clock.seconds == pytest.approx(100.0 + 2.0 + 1.0)
    assert clock.stop() == pytest.approx(100.0 + 2.0 + 5.0)


def _adam_step(optimizer, losses: dict, lr: float) -> StepResult:
    """What a run's step ends with: the summed losses' backward pass and one update (at ``lr``)."""
    loss = sum(losses.values())
    optimizer.zero_grad(set_to_none=True)
    optimizer.backward(loss)
    optimizer.step()
    return StepResult(losses, loss, lr)


class _CountingTask:
    """A one-weight run; records what the loop asked."""

    command = "test loop"
    final_scalar = ("eval/value", "value")

    def __init__(self, cfg: ShapeRunConfig) -> None:
        self.cfg = cfg
        self.weight = nn.Parameter(torch.ones(1))
        self.optimizer = build_optimizer([nn.ParameterList([self.weight])], lr=cfg.train.lrate)
        self.generator = torch.Generator().manual_seed(0)
        self.loop, self.resumed = LoopState(), False
        self.steps, self.evaluated, self.logged, self.rates = [], [], [], []

    def step(self, step, progress=0.0):
        self.steps.append(step)
        lr = set_learning_rates(self.optimizer, self.cfg.train, step, progress)
        self.rates.append(self.optimizer.param_groups[0]["lr"])
        return _adam_step(self.optimizer, {"square": (self.weight ** 2).sum()}, lr)

    def named_parameters(self):
        return [("weight", self.weight)]

    def log(self, step, losses, loss):
        self.logged.append(step)
        return {}, {}

    def kappa_module(self):
        return nn.Linear(2, 2)  # no conditioned layers: empty records

    def evaluate(self, step):
        self.evaluated.append(step)
        return Evaluation({"value": step})

    def checkpoint_fields(self):
        return {"weight": {"w": self.weight.detach().clone()}}

    def checkpoint_extras(self):
        return {"mine": len(self.steps)}

    def finish(self, state, out_dir, ckpt_path):
        return {"value": float(self.weight.detach()), "steps": state.step, "history": state.history}


def test_loop_cadences_and_checkpoint(tmp_path):
    cfg = _shape_cfg(tmp_path, iters=12, log_every=3, kappa_every=5, eval_every=4, ckpt_every=6)
    task = _CountingTask(cfg)
    out = tmp_path / "run"
    metrics = train_loop(task, out, out / "checkpoints" / "latest.pt", progress=False)
    assert task.steps == list(range(12)) and metrics["steps"] == 12
    assert task.logged == [3, 6, 9, 12] and task.evaluated == [4, 8]
    assert [h["step"] for h in metrics["history"]] == [4, 8]
    assert [k["step"] for k in task.loop.kappa_history] == [1, 5, 10]
    payload, saved = load_checkpoint(out / "checkpoints" / "latest.pt")
    assert saved == cfg and payload["step"] == 12 and payload["extra"]["mine"] == 12
    assert payload["extra"]["history"] == metrics["history"]
    # 12 plain gradient steps of w^2 with Adam from w = 1: each moves w by about lr towards 0
    assert float(payload["fields"]["weight"]["w"]) == pytest.approx(1.0 - 12 * cfg.train.lrate, rel=1e-3)
    assert (out / "config.json").is_file() and (out / "tb").is_dir()


def test_loop_resumes_where_the_state_says(tmp_path):
    cfg = _shape_cfg(tmp_path, iters=6, log_every=100, kappa_every=0)
    task = _CountingTask(cfg)
    task.loop = LoopState(step=4, history=[{"step": 2}], train_seconds=3.0)
    task.resumed = True
    metrics = train_loop(task, tmp_path / "run", tmp_path / "run" / "checkpoints" / "latest.pt", progress=False)
    assert task.steps == [4, 5] and task.logged == [6] and metrics["history"] == [{"step": 2}]
    assert task.loop.train_seconds >= 3.0
    assert dataclasses.asdict(task.loop)["step"] == 6


def test_cooldown_anneals_the_last_fraction_of_the_steps_to_a_tenth(tmp_path):
    iters, cooldown, lrate = 10, 0.4, 0.01
    cfg = _shape_cfg(tmp_path, iters=iters, lrate=lrate, lrate_cooldown=cooldown, log_every=100, kappa_every=0)
    task = _CountingTask(cfg)
    train_loop(task, tmp_path / "run", tmp_path / "run" / "checkpoints" / "latest.pt", progress=False)
    seen = task.rates
    progress = np.arange(iters) / iters
    expected = lrate * np.where(progress <= 1 - cooldown, 1.0, 10.0 ** (-(progress - (1 - cooldown)) / cooldown))
    np.testing.assert_allclose(seen, expected, rtol=1e-12)
    assert seen[-1] < lrate / 4  # step 9 of 10: 10 ** -0.75 of the rate


def test_run_progress_is_the_further_of_steps_and_time():
    assert training_progress(3, 10, seconds=8.0, time_budget=10.0) == pytest.approx(0.8)
    assert training_progress(6, 10, seconds=2.0, time_budget=10.0) == pytest.approx(0.6)
    assert training_progress(6, 10, seconds=50.0, time_budget=0.0) == pytest.approx(0.6)
    assert training_progress(6, 10, seconds=12.0, time_budget=10.0) == 1.0
    assert cooldown_factor(0.9, 0.0) == 1.0 and cooldown_factor(0.5, 0.5) == 1.0
    assert cooldown_factor(1.0, 0.5) == pytest.approx(0.1)
