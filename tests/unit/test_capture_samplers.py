"""benchmarks.capture_samplers: the figure's curves are the runs' periodic evaluations."""

from __future__ import annotations

import json

from benchmarks import capture_samplers


def _run(basedir, name, history):
    (basedir / name).mkdir(parents=True)
    (basedir / name / "metrics.json").write_text(json.dumps({"history": history}))


def test_curves_are_the_periodic_evaluations_without_the_final_one(tmp_path):
    periodic = [{"step": 1000, "train_seconds": 100.0, "psnr": 20.0}, {"step": 2000, "train_seconds": 210.0, "psnr": 22.5}]
    final = {"step": 2400, "train_seconds": 600.0, "psnr": 21.0}  # every held-out view: not a point of the curve
    _run(tmp_path, "fox_defaults", [*periodic, final])
    _run(tmp_path, "boardgame_hierarchical", [periodic[0], final])
    curves = capture_samplers.histories(tmp_path)
    assert curves == {"fox": {"proposal, 10 min": periodic}, "boardgame": {"hierarchical, 10 min": periodic[:1]}}


def test_missing_runs_are_named_and_nothing_is_written(tmp_path, capsys):
    _run(tmp_path, "fox_defaults", [{"step": 1, "train_seconds": 1.0, "psnr": 1.0}] * 2)
    out = tmp_path / "fig.png"
    assert capture_samplers.main(["--basedir", str(tmp_path), "--plot", str(out)]) == 2
    err = capsys.readouterr().err
    assert "fox_30min" in err and "boardgame_hierarchical" in err and "fox_defaults" not in err
    assert not out.exists()


def test_a_gone_run_is_left_out_of_the_figure_and_said(tmp_path, capsys):
    for name in ("fox_defaults", "boardgame_hierarchical"):
        _run(tmp_path, name, [{"step": 1, "train_seconds": 60.0, "psnr": 20.0}] * 2)
    out = tmp_path / "fig.png"
    assert capture_samplers.main(["--basedir", str(tmp_path), "--plot", str(out)]) == 0
    said = capsys.readouterr().out
    assert "fox_30min" in said and "boardgame_defaults" in said and "fox_defaults" not in said
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
