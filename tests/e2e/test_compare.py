"""`enerf compare`: grid planning, skipping / resuming, table numbers against metrics.json, plots."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import time
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
from scipy import stats

from enerf.cli import main
from enerf.compare.compare import run_compare
from enerf.compare.grid import ProcessResult, threads_per_run
from enerf.compare.tasks import parse_mode
from enerf.config import CompareConfig, DataConfig, RunConfig
from enerf.synthetic.scene import make_synthetic_scene
from enerf.errors import ConfigError, EnerfError


def _flag(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory) -> Path:
    return make_synthetic_scene(tmp_path_factory.mktemp("scene") / "tiny", n_views=6, width=24, height=18, seed=2)


class FakeRunner:
    """Stands in for `enerf train` / `enerf shape train`: writes a run folder with random numbers.

    NeRF runs also get a config.json (on ``scene``) and a held-out rendering, as real runs do.
    """

    def __init__(self, task: str, scene: Path | None = None, seed: int = 0, null_lpips: tuple = ()):
        self.task, self.scene, self.calls = task, scene, []
        self.rng = np.random.default_rng(seed)
        self.null_lpips = null_lpips  # (scene, conditioning, layers, seed) of the runs whose lpips is null

    def __call__(self, cmd: list[str], env: dict, log_path: Path) -> ProcessResult:
        self.calls.append((cmd, env))
        config_run_folder = Path(_flag(cmd, "--basedir")) / _flag(cmd, "--expname")
        config_run_folder.mkdir(parents=True, exist_ok=True)
        r = self.rng.uniform
        steps = [10, 20, 30]
        if self.task == "nerf":
            key = (_flag(cmd, "--scene"), _flag(cmd, "--conditioning"), _flag(cmd, "--conditioned_layers"),
                   int(_flag(cmd, "--seed")))
            metrics = {"psnr": r(20, 30), "ssim": r(0.5, 0.9), "lpips": None if key in self.null_lpips else r(0.1, 0.4),
                       "history": [{"step": s, "psnr": r(10, 30)} for s in steps], "train_seconds": r(1, 2),
                       "per_image": [{"view": 0, "psnr": r(20, 30)}]}
            cfg = RunConfig(data=DataConfig(datadir=str(self.scene), factor=1, llffhold=3))
            (config_run_folder / "config.json").write_text(json.dumps(cfg.to_dict()))
            (config_run_folder / "test_views").mkdir(exist_ok=True)
            iio.imwrite(config_run_folder / "test_views" / "view_000.png", self.rng.integers(0, 256, (18, 24, 3), dtype=np.uint8))
        else:
            metrics = {"iou": r(0.5, 1), "chamfer_l1": r(1e-3, 1e-2), "normal_consistency": r(0.8, 1), "fscore": r(0.5, 1),
                       "history": [{"step": s, "iou": r(0, 1)} for s in steps], "train_seconds": r(1, 2)}
        (config_run_folder / "metrics.json").write_text(json.dumps(metrics))
        log_path.write_text("fake\n")
        return ProcessResult(0, 0.01, 0.1)


def _read_csv(path: Path) -> dict[tuple[str, str], dict]:
    with open(path, newline="") as f:
        return {(row["scene"], row["mode"]): row for row in csv.DictReader(f)}


def _metrics(out: Path, scene: str, label: str, seed: int) -> dict:
    return json.loads((out / "runs" / f"{scene}-{label}-s{seed}" / "metrics.json").read_text())


def test_table_numbers_equal_the_runs_metrics(tmp_path, scene_dir):
    config = tmp_path / "base.txt"
    config.write_text("netwidth = 16\n")
    scenes, modes, seeds = ("fern", "room"), ("none", "row", "row:all"), (0, 1, 2)
    runner = FakeRunner("nerf", scene_dir, null_lpips={("room", "row", "all", 1)})
    cfg = CompareConfig(scenes=scenes, modes=modes, seeds=seeds, out=str(tmp_path / "cmp"), jobs=2)
    run_compare(cfg, str(config), ["--iters", "7"], runner=runner, progress=False)
    out = Path(cfg.out)
    assert len(runner.calls) == 18
    cmd, env = runner.calls[0]
    assert _flag(cmd, "--config") == str(config) and cmd[-2:] == ["--iters", "7"] and "--quiet" in cmd
    assert env["OMP_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2)) == str(threads_per_run(2))

    table = _read_csv(out / "compare.csv")
    labels = {"none": "none", "row": "row", "row:all": "row@all"}
    for key in ("psnr", "ssim", "lpips"):
        per_scene = {(s, m): [_metrics(out, s, labels[m], k)[key] for k in seeds] for s in scenes for m in modes}
        for m in modes:
            for s in scenes:
                vals = per_scene[(s, m)]
                row = table[(s, m)]
                if None in vals:
                    assert row[f"{key}_mean"] == "n/a" and row[f"{key}_std"] == "n/a"
                    continue
                assert float(row[f"{key}_mean"]) == pytest.approx(np.mean(vals), rel=1e-12)
                assert float(row[f"{key}_std"]) == pytest.approx(np.std(vals, ddof=1), rel=1e-12)
                if m != "none":
                    base = np.mean(per_scene[(s, "none")])
                    assert float(row[f"{key}_delta_vs_none"]) == pytest.approx(np.mean(vals) - base, rel=1e-9)
                    if None not in per_scene[(s, "none")]:  # paired t interval, as scipy computes it
                        ci = stats.ttest_rel(vals, per_scene[(s, "none")]).confidence_interval(0.95)
                        assert float(row[f"{key}_delta_ci95_low"]) == pytest.approx(ci.low, rel=1e-9)
                        assert float(row[f"{key}_delta_ci95_high"]) == pytest.approx(ci.high, rel=1e-9)
                else:
                    assert row[f"{key}_delta_vs_none"] == ""
            # Avg.: scenes averaged within each seed, then mean / std over seeds
            per_seed = [np.mean([per_scene[(s, m)][k] for s in scenes]) if all(per_scene[(s, m)][k] is not None
                        for s in scenes) else None for k in range(len(seeds))]
            if None in per_seed:
                assert table[("Avg.", m)][f"{key}_mean"] == "n/a"
            else:
                assert float(table[("Avg.", m)][f"{key}_mean"]) == pytest.approx(np.mean(per_seed), rel=1e-12)
                assert float(table[("Avg.", m)][f"{key}_std"]) == pytest.approx(np.std(per_seed, ddof=1), rel=1e-12)

    md = (out / "compare.md").read_text()
    row_all = next(line for line in md.splitlines() if line.startswith("| row:all |") and "n/a" in line)
    assert row_all.count("n/a") == 2  # room has the null lpips seed -> room and Avg. are n/a
    psnr_fern_row = f"{np.mean([_metrics(out, 'fern', 'row', k)['psnr'] for k in seeds]):.2f}"
    assert f"| row | {psnr_fern_row} ± " in md
    low = float(table[("fern", "row")]["psnr_delta_ci95_low"])
    assert f"[{low:+.2f}, " in md
    for name in ("psnr_curves.png", "side_by_side.png"):
        assert iio.imread(out / name).ndim == 3


def test_each_scene_runs_with_its_own_config(tmp_path, scene_dir):
    fern, other = tmp_path / "fern.txt", tmp_path / "all.txt"
    fern.write_text("netwidth = 16\n")
    other.write_text("netwidth = 8\n")
    runner = FakeRunner("nerf", scene_dir)
    cfg = CompareConfig(scenes=("fern", "room"), modes=("none",), seeds=(0,), out=str(tmp_path / "cmp"))
    run_compare(cfg, [f"fern={fern}", str(other)], [], runner=runner, progress=False)
    used = {_flag(cmd, "--scene"): _flag(cmd, "--config") for cmd, _ in runner.calls}
    assert used == {"fern": str(fern), "room": str(other)}
    with pytest.raises(ConfigError, match="lego"):
        run_compare(cfg, [f"lego={fern}"], [], runner=runner, progress=False)


def test_finished_runs_are_skipped_and_changed_ones_rerun(tmp_path, scene_dir):
    cfg = CompareConfig(scenes=("fern",), modes=("none", "row"), seeds=(0,), out=str(tmp_path / "cmp"))
    runner = FakeRunner("nerf", scene_dir)
    run_compare(cfg, None, ["--iters", "5"], runner=runner, progress=False)
    first = (tmp_path / "cmp" / "compare.csv").read_text()
    assert len(runner.calls) == 2
    run_compare(cfg, None, ["--iters", "5"], runner=runner, progress=False)
    assert len(runner.calls) == 2  # both finished and matching: skipped
    assert (tmp_path / "cmp" / "compare.csv").read_text() == first
    run_compare(cfg, None, ["--iters", "6"], runner=runner, progress=False)
    assert len(runner.calls) == 4  # the extra flags changed: rerun
    assert (tmp_path / "cmp" / "compare.csv").read_text() != first


def test_config_edits_rerun_only_when_a_setting_changes(tmp_path, scene_dir):
    config = tmp_path / "fern.txt"
    config.write_text("# first version\nlrate = 5e-4\nN_samples = 16\n")
    cfg = CompareConfig(scenes=("fern",), modes=("none",), seeds=(0,), out=str(tmp_path / "cmp"))
    runner = FakeRunner("nerf", scene_dir)
    run_compare(cfg, [str(config)], [], runner=runner, progress=False)
    assert len(runner.calls) == 1
    config.write_text("# reworded comment\n\nN_samples   =   16   # inline comment\nlrate = 5e-4\n")
    run_compare(cfg, [str(config)], [], runner=runner, progress=False)
    assert len(runner.calls) == 1  # same settings, other comments, order and spacing: skipped
    record_path = tmp_path / "cmp" / "runs" / "fern-none-s0" / "compare_run.json"
    record = json.loads(record_path.read_text())
    old_style = {**record["signature"], "config_sha256": hashlib.sha256(config.read_bytes()).hexdigest()}
    assert old_style != record["signature"]
    record_path.write_text(json.dumps({**record, "signature": old_style}))  # a record from before: the file's bytes
    run_compare(cfg, [str(config)], [], runner=runner, progress=False)
    assert len(runner.calls) == 1
    config.write_text("# reworded comment\nN_samples = 16\nlrate = 1e-3\n")
    run_compare(cfg, [str(config)], [], runner=runner, progress=False)
    assert len(runner.calls) == 2  # a setting changed: rerun


def test_interrupted_run_is_resumed(tmp_path, scene_dir):
    for task, flag_expected in (("nerf", True), ("shape", True)):
        cfg = CompareConfig(task=task, scenes=("bunny",), modes=("row",), seeds=(0,), out=str(tmp_path / task))
        runner = FakeRunner(task, scene_dir)
        run_compare(cfg, None, [], runner=runner, progress=False)
        run = tmp_path / task / "runs" / "bunny-row-s0"
        record = json.loads((run / "compare_run.json").read_text())
        (run / "compare_run.json").write_text(json.dumps({**record, "status": "running"}))  # cut off
        (run / "metrics.json").unlink()
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / "latest.pt").write_bytes(b"x")
        run_compare(cfg, None, [], runner=runner, progress=False)
        assert len(runner.calls) == 2
        assert ("--resume" in runner.calls[1][0]) is flag_expected


def test_shape_task_uses_shape_train_and_its_columns(tmp_path):
    cfg = CompareConfig(task="shape", scenes=("bunny", "armadillo"), modes=("none", "row+bnp:all"), seeds=(0, 1),
                        out=str(tmp_path / "cmp"))
    runner = FakeRunner("shape")
    run_compare(cfg, None, ["--kind", "sdf", "--iters", "3"], runner=runner, progress=False)
    cmd = runner.calls[-1][0]
    assert cmd[3:5] == ["shape", "train"] and _flag(cmd, "--mesh") == "armadillo"
    assert (_flag(cmd, "--conditioning"), _flag(cmd, "--precond"), _flag(cmd, "--conditioned_layers")) == ("row", "bnp", "all")
    out = Path(cfg.out)
    table = _read_csv(out / "compare.csv")
    ious = [_metrics(out, "bunny", "row+bnp@all", k)["iou"] for k in (0, 1)]
    assert float(table[("bunny", "row+bnp:all")]["iou_mean"]) == pytest.approx(np.mean(ious), rel=1e-12)
    md = (out / "compare.md").read_text()
    for heading in ("IoU", "Chamfer-L1", "NC", "F-score"):
        assert f"## {heading} " in md
    assert (out / "iou_curves.png").is_file() and not (out / "side_by_side.png").exists()


def test_a_mesh_file_goes_by_its_name_without_the_suffix(tmp_path):
    mesh = tmp_path / "meshes" / "armadillo.off"
    mesh.parent.mkdir()
    mesh.write_text("OFF\n0 0 0\n")
    cfg = CompareConfig(task="shape", scenes=(str(mesh),), modes=("none",), seeds=(0,), out=str(tmp_path / "cmp"))
    runner = FakeRunner("shape")
    run_compare(cfg, None, [], runner=runner, progress=False)
    assert _flag(runner.calls[0][0], "--mesh") == str(mesh)
    assert [p.name for p in (Path(cfg.out) / "runs").iterdir()] == ["armadillo-none-s0"]
    assert ("armadillo", "none") in _read_csv(Path(cfg.out) / "compare.csv")


@pytest.mark.parametrize("spec", ["", "+bnp", "row+", "row:", "frob", "row*", "row*0", "row*-1", "row*x", "row*inf", "*2"])
def test_bad_mode_specs_are_rejected(spec):
    with pytest.raises(ConfigError):
        parse_mode(spec, ("none", "row"), ("none", "bnp"), lr_scales=True)


def test_learning_rate_factor_mode():
    mode = parse_mode("row+bnp:all*0.5", ("none", "row"), ("none", "bnp"), lr_scales=True)
    assert (mode.conditioning, mode.precond, mode.layers, mode.lr_scale) == ("row", "bnp", "all", "0.5")
    assert mode.flags()[-2:] == ["--lrate_scale", "0.5"] and mode.label == "row+bnp@allx0.5"
    assert "--lrate_scale" not in parse_mode("row", lr_scales=True).flags()
    with pytest.raises(ConfigError, match="only for --task nerf"):
        parse_mode("row*2")  # shape runs have no --lrate_scale


def test_failed_run_is_reported(tmp_path, capsys):
    cfg = CompareConfig(scenes=("fern",), modes=("none",), seeds=(0,), out=str(tmp_path / "cmp"))
    with pytest.raises(EnerfError, match="compare.log"):
        run_compare(cfg, None, [], runner=lambda cmd, env, log: ProcessResult(3, 0.0, None), progress=False)


def _in_process(cmd: list[str], env: dict, log_path: Path) -> ProcessResult:
    tic = time.perf_counter()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        code = main(cmd[3:])
    log_path.write_text(buf.getvalue())
    return ProcessResult(code, time.perf_counter() - tic, None)


def test_real_runs_give_table_curves_side_by_side_and_conditioning(tmp_path):
    scene = make_synthetic_scene(tmp_path / "tiny", n_views=6, width=24, height=18, seed=2)
    extra = ["--preset", "none", "--factor", "1", "--llffhold", "3", "--netdepth", "2", "--netwidth", "16", "--view_width", "8",
             "--multires", "2", "--multires_views", "1", "--N_samples", "8", "--N_rand", "64", "--iters", "6",
             "--eval_every", "3", "--kappa_every", "3", "--log_every", "3", "--no_lpips", "--chunk", "4096",
             "--eval_stride", "2"]  # side_by_side.png shows the pixels scored: every 2nd row and column
    cfg = CompareConfig(scenes=(str(scene),), modes=("none", "row"), seeds=(0,), out=str(tmp_path / "cmp"))
    run_compare(cfg, None, extra, runner=_in_process, progress=False)
    out = Path(cfg.out)
    table = _read_csv(out / "compare.csv")
    for mode in ("none", "row"):
        metrics = json.loads((out / "runs" / f"tiny-{mode}-s0" / "metrics.json").read_text())
        assert float(table[("tiny", mode)]["psnr_mean"]) == metrics["psnr"]
        assert table[("tiny", mode)]["lpips_mean"] == "n/a"
        assert [h["step"] for h in metrics["kappa_history"]] == [1, 3, 6]
        # each evaluation's training PSNR: the mean of the batch PSNRs TensorBoard logged since the last one
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        logged = {e.step: e.value for e in EventAccumulator(str(out / "runs" / f"tiny-{mode}-s0" / "tb")).Reload()
                  .Scalars("train/psnr")}
        previous = 0
        for h in metrics["history"]:
            since = [v for k, v in logged.items() if previous < k <= h["step"]]
            assert h["train_psnr"] == pytest.approx(np.mean(since), abs=1e-4)
            previous = h["step"]
    for name in ("psnr_curves.png", "train_psnr_curves.png", "side_by_side.png", "conditioning.png"):
        assert iio.imread(out / name).shape[-1] in (3, 4)
    # the CLI front end: everything finished, so nothing runs again and the table is unchanged
    before = (out / "compare.csv").read_text()
    assert main(["compare", "--scenes", str(scene), "--modes", "none", "row", "--seeds", "0", "--out", str(out),
                 "--quiet", "--", *extra]) == 0
    assert (out / "compare.csv").read_text() == before


def test_compare_cli_rejects_bad_input(tmp_path, capsys):
    assert main(["compare", "--modes", "none", "frob", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "frob" in err[0]
