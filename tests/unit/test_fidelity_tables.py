"""docs/captures.md's fidelity tables: each capture's zero-config run (capture_defaults.json) first, then its
option runs (fidelity.json) on the same split; and benchmarks.real's ``--record`` entry."""

from __future__ import annotations

from benchmarks import real
from benchmarks.harness import TRAINING_CODE
from benchmarks.pages import capture_tables


def _run(psnr, flags=(), **extra):
    return {"flags": list(flags), "psnr": psnr, "steps": 1000, "worst_view": 3, "worst_below_mean": 1.5,
            "psnr_fit_right": psnr + 0.5, "final_eval_share": 0.05, "psnr_seen": psnr + 0.25, "seen_fraction": 0.9,
            **extra}


RECORDS = {
    "capture_defaults": {"runs": {"fox_defaults": _run(30.0), "fox_far_defaults": _run(20.0, ["--holdout", "far"]),
                                  "beer_defaults": _run(33.0)}},
    "fidelity": {"runs": {"beer_appearance": _run(32.0, ["--appearance", "affine"]),
                          "fox_appearance": _run(29.0, ["--appearance", "affine"]),
                          "fox_far_visibility": _run(21.0, ["--holdout", "far", "--visibility_loss", "0.01"]),
                          "fox_probe": _run(1.0, diagnostic="a probe")}},
}


def test_rows_are_each_captures_defaults_then_its_options(monkeypatch):
    monkeypatch.setattr(capture_tables, "record", RECORDS.__getitem__)
    every = [line.split(" | ")[0].lstrip("| ") for line in capture_tables.fidelity().splitlines()[2:]]
    assert every == ["beer_defaults", "beer_appearance", "fox_defaults", "fox_appearance"]
    far = capture_tables.fidelity_far().splitlines()[2:]
    assert [line.split(" | ")[0].lstrip("| ") for line in far] == ["fox_far_defaults", "fox_far_visibility"]
    # the options column leaves the split out; the last column is the same capture's every-8th defaults run
    assert "| `--visibility_loss 0.01` |" in far[1] and "none (the defaults)" in far[0]
    assert far[1].endswith("| 30.00 dB (1,000 steps) |") and "| 21.25 dB (90.0 %) |" in far[1]


def test_record_keeps_the_replaced_rerun_and_writes_what_the_pages_read():
    old = {"what": "lego, 10 minutes", "rerun": {"psnr": 29.7}, "previous_reruns": [{"psnr": 29.8}], "runs": [1]}
    summary = {"psnr": 29.456, "ssim": 0.94449, "steps": 1500, "load": {"before": [0.5, 0.4, 0.3], "after": None}}
    new = real.with_rerun(old, summary, "abc1234", "configs/lego_cpu.txt", "python -m benchmarks.real --scene lego")
    assert new["previous_reruns"] == [{"psnr": 29.8}, {"psnr": 29.7}]
    assert new["summary"] == {"psnr": 29.46, "ssim": 0.944}
    assert new["rerun"]["load_before"] == [0.5, 0.4, 0.3] and new["rerun"]["steps"] == 1500
    assert new["depends"] == [*TRAINING_CODE, "configs/lego_cpu.txt"] and new["commit"] == "abc1234"
    assert new["what"] == "lego, 10 minutes" and new["runs"] == [1] and old["rerun"] == {"psnr": 29.7}


def test_the_recorded_command_trains_again():
    argv = ["--scene", "lego", "--reuse", "--commit", "abc1234", "--record", "benchmarks/lego_cpu.json"]
    assert real.reproduce_command(argv) == "python -m benchmarks.real --scene lego --record benchmarks/lego_cpu.json"


def test_a_record_it_cannot_take_is_said_in_one_line_before_training(tmp_path):
    many = tmp_path / "fern.json"
    many.write_text('{"summary": {"psnr_mean": 24.2, "psnr_std": 0.01}}')
    broken = tmp_path / "broken.json"
    broken.write_text('{"summary": ')
    one = tmp_path / "lego.json"
    one.write_text('{"summary": {"psnr": 30.5, "ssim": 0.95}}')
    assert "psnr_mean, psnr_std" in real.record_problem(many)
    assert "not a readable JSON record" in real.record_problem(broken)
    assert real.record_problem(one) is None and real.record_problem(tmp_path / "new.json") is None
