"""benchmarks/video_recipe.py: the record of the phone-video recipe, from a finished run (--existing)."""

from __future__ import annotations

import json

import pytest

from benchmarks import video_recipe


def _fake_run(root, frames: int, per_view: dict[int, float]) -> None:
    scene = root / "runs" / "r" / "capture"
    scene.mkdir(parents=True)
    (scene / "transforms.json").write_text(json.dumps({"frames": [{"file_path": f"images/{i}.png"} for i in range(frames)]}))
    metrics = {"psnr": sum(per_view.values()) / len(per_view), "ssim": 0.9, "steps": 123, "train_seconds": 600.0,
               "wall_seconds": {"load": 2.0, "train": 610.0, "eval": 30.0, "total": 642.0},
               "per_image": [{"view": v, "psnr": p} for v, p in per_view.items()]}
    (scene / "metrics.json").write_text(json.dumps(metrics))


def test_existing_run_is_recorded_with_each_commands_time(tmp_path, monkeypatch):
    _fake_run(tmp_path, 7, {0: 30.0, 8: 32.0})
    monkeypatch.setattr(video_recipe, "ROOT", tmp_path)
    assert video_recipe.main(["--out", "runs/r", "--record", "rec.json", "--existing", "--video_seconds", "100",
                              "--train_seconds", "700", "--load", "0.5 1 1.5", "--commit", "abc1234"]) == 0
    rec = json.loads((tmp_path / "rec.json").read_text())
    assert rec["registered"] == 7 and rec["commit"] == "abc1234"
    assert rec["psnr"] == pytest.approx(31.0)
    assert [(v["view"], v["psnr"]) for v in rec["views"]] == [(0, 30.0), (8, 32.0)]
    assert rec["worst_view"] == 0 and rec["worst_below_mean"] == pytest.approx(1.0)
    assert rec["final_eval_share"] == pytest.approx(30.0 / 600.0)
    assert rec["total_seconds"] == pytest.approx(800.0) and rec["total_minutes"] == pytest.approx(800 / 60)
    assert rec["load_before"] == [0.5, 1.0, 1.5]
    assert rec["recipe"] == ("enerf data video ../shared/data/video/beer.mp4 --out runs/r/capture && "
                             "enerf train --datadir runs/r/capture --basedir runs/r")
    # what docs/walkthrough.md's table calls the preview: the train command's wall after metrics.json's stages
    assert rec["total_seconds"] - rec["video_seconds"] - rec["wall_seconds"]["total"] == pytest.approx(700 - 642)


@pytest.mark.parametrize("argv", [["--existing", "--video_seconds", "100"],
                                  ["--existing", "--video_seconds", "1", "--train_seconds", "2", "--load", "high"]])
def test_existing_without_times_or_load_is_one_line(tmp_path, monkeypatch, argv):
    monkeypatch.setattr(video_recipe, "ROOT", tmp_path)
    with pytest.raises(SystemExit) as err:
        video_recipe.main(argv)
    assert str(err.value) == "video_recipe: --existing needs --video_seconds, --train_seconds and --load 'B1 B5 B15'"


def test_existing_without_a_run_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(video_recipe, "ROOT", tmp_path)
    with pytest.raises(SystemExit) as err:
        video_recipe.main(["--out", "runs/none", "--existing", "--video_seconds", "1", "--train_seconds", "2",
                           "--load", "1 1 1"])
    assert str(err.value) == "video_recipe: no runs/none/capture/metrics.json; run the recipe first (drop --existing)"
