"""`enerf train` without a config file: the device's preset fills what no flag sets, one line
says which; the time estimate after the first timed steps; progress bars of evaluations,
renders and mesh grids (on a terminal only)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

import enerf.progress
import enerf.train.loop as loop_module
from enerf.cli import main
from enerf.cli.train import build_train_parser, train_config
from enerf.config import FieldConfig, RenderConfig, RunConfig, ShapeFieldConfig, ShapeRunConfig, ShapeTrainConfig
from enerf.config.presets import PRESETS, preset_line
from enerf.data.loaders import load_scene
from enerf.render.images import render_rays_image
from enerf.export.isosurface import query_grid
from enerf.optim import build_optimizer
from enerf.render import build_renderer
from enerf.render.build import build_fields
from enerf.train.estimate import StepEstimate, estimate_line
from enerf.train.loop import StepResult, train_loop
from enerf.train.state import LoopState

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
TINY = ["--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "16", "--view_width", "8",
        "--multires", "2", "--multires_views", "1", "--N_samples", "8", "--N_importance", "0", "--N_rand", "64",
        "--no_lpips", "--chunk", "1024"]


def _resolve(argv: list[str]):
    args = build_train_parser().parse_args(argv)
    cfg, preset, device, _ = train_config(args, Path("no_data_root"))
    return preset, device == "cuda", cfg


def _blender_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "blender_scene"
    folder.mkdir()
    (folder / "transforms_train.json").write_text("{}")
    return folder


def test_cpu_preset_on_a_cpu_is_the_10_minute_settings(scene_dir, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    preset, cuda, cfg = _resolve(["--datadir", str(scene_dir), "--conditioning", "row", "--preset", "auto"])
    assert not cuda and (preset.name, preset.layout) == ("cpu", "llff")
    # configs/fern_cpu.txt, by hand
    assert (cfg.field.encoding, cfg.field.netdepth, cfg.field.netwidth, cfg.field.view_width) == ("triplane", 2, 64, 64)
    assert cfg.field.grid_resolutions == (64, 256) and cfg.field.grid_components == 16
    assert (cfg.render.n_samples, cfg.render.n_importance, cfg.render.rgb_weight_threshold) == (64, 0, 1e-4)
    assert (cfg.train.lrate, cfg.train.encoding_lrate, cfg.train.lrate_decay, cfg.train.lrate_cooldown) == (4e-3, 4e-2, 10, 0.3)
    assert (cfg.train.iters, cfg.train.time_budget, cfg.train.n_rand) == (100000, 600.0, 1024)
    # the method stays the user's; the run is named after the scene folder, as enerf train names it
    assert cfg.field.conditioning == "row" and cfg.expname == Path(scene_dir).name


def test_cuda_preset_on_cuda_and_paper_and_blender_layouts(scene_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    preset, cuda, cfg = _resolve(["--datadir", str(scene_dir), "--preset", "auto"])
    assert cuda and (preset.name, preset.layout) == ("cuda", "llff")
    # configs/fern_cuda.txt, by hand: the cpu preset's field at the paper's image size, 4,096 rays a step
    assert (cfg.data.factor, cfg.train.n_rand, cfg.field.encoding, cfg.field.netwidth) == (4, 4096, "triplane", 64)
    assert (cfg.train.time_budget, cfg.train.lrate_decay, cfg.render.n_samples) == (300.0, 30, 64)
    preset, _, cfg = _resolve(["--datadir", str(scene_dir), "--preset", "paper"])
    assert (cfg.field.netdepth, cfg.field.netwidth, cfg.field.encoding) == (8, 256, "frequency")
    assert (cfg.render.n_samples, cfg.render.n_importance, cfg.train.iters, cfg.train.lrate_decay) == (64, 64, 200000, 250)
    preset, _, cfg = _resolve(["--datadir", str(_blender_dir(tmp_path)), "--preset", "auto"])
    assert (preset.name, preset.layout) == ("cuda", "blender")
    assert (cfg.render.sampler, cfg.data.factor, cfg.data.half_res, cfg.render.target_sample_batch_size) == (
        "auto", 1, False, 262144)
    preset, _, cfg = _resolve(["--datadir", str(tmp_path / "blender_scene"), "--preset", "paper"])
    assert (cfg.render.n_importance, cfg.data.half_res, cfg.render.white_bkgd, cfg.train.precrop_iters) == (128, True, True, 500)
    # --device cpu on a machine with a GPU: the CPU settings, Blender's
    preset, cuda, cfg = _resolve(["--datadir", str(tmp_path / "blender_scene"), "--device", "cpu", "--preset", "auto"])
    assert not cuda and (preset.name, preset.layout) == ("cpu", "blender")
    assert (cfg.render.sampler, cfg.render.grid_resolution, cfg.data.testskip, cfg.train.eval_views) == ("torch_grid", 128, 8, 5)


def test_a_flag_and_a_config_file_beat_the_preset(scene_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _, _, cfg = _resolve(["--datadir", str(scene_dir), "--preset", "cpu", "--netwidth", "32", "--N_samples", "16",
                          "--time_budget", "0"])
    assert (cfg.field.netwidth, cfg.render.n_samples, cfg.train.time_budget) == (32, 16, 0.0)
    assert (cfg.field.netdepth, cfg.field.encoding) == (2, "triplane")  # what was not set: the preset's
    config = tmp_path / "mine.txt"
    config.write_text(f"datadir = {scene_dir}\nnetdepth = 3\nlrate = 1e-3\n")
    _, _, cfg = _resolve(["--config", str(config), "--preset", "cpu"])
    assert (cfg.field.netdepth, cfg.train.lrate, cfg.field.netwidth) == (3, 1e-3, 64)


def test_a_config_file_alone_takes_no_preset(monkeypatch):
    """configs/demo.txt reads exactly as before: its keys over the dataclass defaults."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    preset, _, cfg = _resolve(["--config", str(CONFIGS / "demo.txt"), "--preset", "auto"])
    assert preset is None
    defaults = RunConfig()
    assert (cfg.field.encoding, cfg.train.time_budget, cfg.render.rgb_weight_threshold) == (
        defaults.field.encoding, defaults.train.time_budget, defaults.render.rgb_weight_threshold)
    assert (cfg.field.netdepth, cfg.field.netwidth, cfg.render.n_samples, cfg.train.iters) == (4, 96, 32, 3000)
    _, _, same = _resolve(["--config", str(CONFIGS / "demo.txt"), "--preset", "none"])
    assert cfg == same


def test_the_start_line_names_the_preset_and_the_other_one(scene_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    seen = []
    monkeypatch.setattr("enerf.train.nerf.train_nerf", lambda cfg, **kw: seen.append(cfg))
    assert main(["train", "--datadir", str(scene_dir), "--basedir", str(tmp_path), "--preset", "auto"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith("cpu (--device auto: torch sees no CUDA GPU): forward-facing (viewing "
                                               "directions within ")
    assert out[1] == ("per-image appearance: off; robust loss: off; visibility loss: off; near-camera gradient "
                      "scaling: off; held-out views: --holdout every")
    assert out[0].endswith("--scene_kind walkaround if not; 10-minute CPU settings (triplane + 2 x 64 MLP, 64 samples, "
                           "--time_budget 600) from enerf's preset fern_cpu (example file: configs/fern_cpu.txt) for "
                           "what no flag sets; --preset paper for the paper's 8 x 256 network")
    assert seen[0].field.encoding == "triplane"
    assert main(["train", "--datadir", str(scene_dir), "--basedir", str(tmp_path), "--preset", "auto", "--appearance",
                 "affine", "--robust_trim", "0.2", "--holdout", "far", "--visibility_loss", "0.01", "--gradient_scaling",
                 "1"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "per-image appearance: --appearance affine; robust loss: --robust_trim 0.2 in 8 x 8 patches; visibility loss: "
        "--visibility_loss 0.01 (--visibility_views 1); near-camera gradient scaling: --gradient_scaling 1; held-out "
        "views: --holdout far")
    assert preset_line(PRESETS[("paper", "llff")], "paper", "cuda", "--device cuda: NVIDIA H200") == (
        "--preset paper on cuda (--device cuda: NVIDIA H200): the paper's settings (8 x 256 MLP, 64 + 64 samples, "
        "200,000 steps) from enerf's preset fern (example file: configs/fern.txt) for what no flag sets; --preset cuda "
        "for the GPU settings")
    assert main(["train", "--config", str(CONFIGS / "demo.txt"), "--basedir", str(tmp_path), "--preset", "auto"]) == 0
    assert capsys.readouterr().out == ""  # a config file alone: no preset, no line


# ----------------------------------------------------------------------------- the time estimate


def test_estimate_after_the_first_timed_steps():
    est = StepEstimate(iters=1000, time_budget=0.0)
    # fake clock: the first step (warm-up) ends at 0.7 s, every later one takes 0.5 s
    lines = [est.after_step(done, 0.7 + 0.5 * (done - 1)) for done in range(1, 12)]
    # timed from the end of step 1; 3 steps and 2 s needed: step 5 (4 steps in 2.0 s)
    assert lines[:4] == [None] * 4 and all(line is None for line in lines[5:])
    rate, remaining = 4 / 2.0, 1000 - 5
    assert rate == 2.0 and remaining / rate == 497.5
    assert lines[4] == "about 2 steps/s: 8.3 min of training for the remaining 995 steps (--iters 1000)"


def test_estimate_when_the_time_budget_ends_the_run_and_when_it_is_long():
    # the CPU preset: 100,000 steps, 600 s budget, 3.8 s per step after a 10 s first step
    est = StepEstimate(iters=100000, time_budget=600.0)
    lines = [est.after_step(done, 10.0 + 3.8 * (done - 1)) for done in range(1, 6)]
    seconds = 10.0 + 3.8 * 3  # at step 4: 3 steps in 11.4 s
    left, rate = 600.0 - seconds, 3 / 11.4
    assert int(left * rate) == 152 and round(left / 60, 1) == 9.6
    assert lines == [None, None, None, "about 3.8 s per step: --time_budget 600 ends the run after 9.6 min more of "
                     "training, about 152 of the remaining 99,996 steps (--iters 100000)", None]
    # the paper's settings on a CPU: 200,000 steps, no budget
    line = estimate_line(1 / 3.8, 4, 200000, 21.4, 0.0)
    assert f"{199996 * 3.8 / 3600:.1f}" == "211.1"
    assert line == ("about 3.8 s per step: 211.1 h of training for the remaining 199,996 steps (--iters 200000); "
                    "that is more than an hour: --iters N or --time_budget SECONDS shortens it")
    # one very slow step is enough; a run that ends first gets no line
    assert StepEstimate(100, 0.0).after_step(1, 1.0) is None
    slow = StepEstimate(100, 0.0)
    slow.after_step(1, 1.0)
    assert slow.after_step(2, 31.0) == "about 30 s per step: 49.0 min of training for the remaining 98 steps (--iters 100)"
    short = StepEstimate(3, 0.0)
    assert [short.after_step(d, 1.0 * d) for d in (1, 2, 3)] == [None, None, None]


class _Quadratic:
    """A one-weight task whose every step takes 0.25 s on the fake clock ``now``."""

    command = "test estimate"
    final_scalar = ("eval/value", "value")

    def __init__(self, cfg, now: list[float]) -> None:
        self.cfg, self.now = cfg, now
        self.weight = nn.Parameter(torch.ones(1))
        self.optimizer = build_optimizer([nn.ParameterList([self.weight])], lr=cfg.train.lrate)
        self.generator = torch.Generator().manual_seed(0)
        self.loop, self.resumed = LoopState(), False

    def step(self, step, progress=0.0):
        self.now[0] += 0.25
        loss = (self.weight ** 2).sum()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return StepResult({"square": loss}, loss, self.cfg.train.lrate)

    def named_parameters(self):
        return [("weight", self.weight)]

    def log(self, step, losses, loss):
        return {}, {}

    def kappa_module(self):
        return nn.Linear(2, 2)

    def evaluate(self, step):
        raise AssertionError("no evaluations in this run")

    def checkpoint_fields(self):
        return {"weight": {"w": self.weight.detach().clone()}}

    def checkpoint_extras(self):
        return {}

    def finish(self, state, out_dir, ckpt_path):
        return {"value": float(self.weight.detach()), "steps": state.step}


def test_the_loop_prints_the_estimate_once(tmp_path, monkeypatch, capsys):
    now = [100.0]
    monkeypatch.setattr(loop_module.time, "perf_counter", lambda: now[0])
    cfg = ShapeRunConfig(expname="toy", basedir=str(tmp_path), field=ShapeFieldConfig(netdepth=2, netwidth=8, skips=()),
                         train=ShapeTrainConfig(device="cpu", iters=100, log_every=50, kappa_every=0))
    train_loop(_Quadratic(cfg, now), tmp_path / "toy", tmp_path / "toy" / "checkpoints" / "latest.pt", progress=False)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("about")]
    # timed from step 1 on; 8 steps of 0.25 s reach 2 s at step 9: 4 steps/s, 91 steps left
    assert 91 / 4 == 22.75
    assert lines == ["about 4 steps/s: 23 s of training for the remaining 91 steps (--iters 100)"]


# ----------------------------------------------------------------------------- progress bars


def test_chunked_rendering_with_a_bar_is_the_renderers_own(scene_dir):
    """render_rays_image cuts the renderer's chunks itself (so the bar moves between them):
    the pixels are the renderer's, bit for bit."""
    cpu = torch.device("cpu")
    scene = load_scene(dataclasses.replace(RunConfig().data, datadir=str(scene_dir), factor=1, llffhold=4), Path("."))
    torch.manual_seed(0)
    fields = build_fields(FieldConfig(netdepth=2, netwidth=16, view_width=8, multires=2, multires_views=1),
                          cpu, RenderConfig(n_importance=4))
    cfg = RenderConfig(n_samples=8, n_importance=4, chunk=500)
    rays = scene.rays(0)
    for f in fields.values():
        f.eval()
    renderer = build_renderer(cfg, cpu)

    class Bar:
        counts: list[int] = []

        def update(self, n):
            self.counts.append(n)

    bar = Bar()
    with torch.no_grad():
        ours = render_rays_image(rays, fields, cfg, cpu, renderer=renderer, bar=bar)
        theirs = renderer.render_image(rays, fields, 500)
    assert bar.counts == [500, 500, 200] and scene.height * scene.width == 1200
    assert set(ours) == set(theirs)
    for key in theirs:
        assert ours[key].shape == theirs[key].shape and torch.equal(ours[key], theirs[key]), key


def test_the_final_evaluation_shows_a_bar_on_a_terminal(scene_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(enerf.progress, "stderr_is_terminal", lambda: True)
    argv = ["train", "--datadir", str(scene_dir), "--basedir", str(tmp_path), "--preset", "none", "--iters", "2",
            "--eval_every", "1", *TINY]
    assert main([*argv, "--expname", "shown"]) == 0
    err = capsys.readouterr().err
    # 2 held-out views (llffhold 4 of 8) of 40 x 30 = 2,400 rays, in chunks of 1,024
    metrics = json.loads((tmp_path / "shown" / "metrics.json").read_text())
    assert len(metrics["per_image"]) == 2 and 2 * 40 * 30 == 2400
    assert "held-out views: 100%" in err and "2.40k/2.40k" in err and "view 2/2" in err
    assert "eval at step 1" in err  # the periodic evaluation's bar
    assert main([*argv, "--expname", "quiet", "--quiet"]) == 0
    assert "held-out views" not in capsys.readouterr().err
    monkeypatch.setattr(enerf.progress, "stderr_is_terminal", lambda: False)  # a log file: no bar
    assert main([*argv, "--expname", "logged"]) == 0
    assert "held-out views" not in capsys.readouterr().err


def test_the_mesh_grid_bar_counts_every_point(monkeypatch, capsys):
    monkeypatch.setattr(enerf.progress, "stderr_is_terminal", lambda: True)
    values = query_grid(lambda p: p.norm(dim=-1), (-1, -1, -1), (1, 1, 1), 8, chunk=100, progress=True,
                        desc="density 8^3")
    axis = np.linspace(-1, 1, 8)
    x, y, z = np.meshgrid(axis, axis, axis, indexing="ij")
    np.testing.assert_allclose(values, np.sqrt(x**2 + y**2 + z**2), rtol=1e-6)
    err = capsys.readouterr().err
    assert "density 8^3: 100%" in err and "512/512" in err
