"""docs/captures.md's fidelity tables: each capture's zero-config run (capture_defaults.json) first, then its
option runs (fidelity.json) on the same split; and benchmarks.real's ``--record`` entry."""

from __future__ import annotations

import subprocess

import numpy as np

from benchmarks import real
from benchmarks.harness import TRAINING_CODE, oldest_commit
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
    seeds = tmp_path / "seeds.json"
    seeds.write_text('{"summary": {"psnr_mean": 24.2}, "runs": [{"seed": 0, "psnr": 24.2, "steps": 9, '
                     '"train_seconds": 1.0}]}')
    no_steps = tmp_path / "no_steps.json"  # a per-seed record whose summary could not be recomputed
    no_steps.write_text('{"summary": {"psnr_mean": 24.2}, "runs": [{"seed": 0, "psnr": 24.2}]}')
    assert "psnr_mean, psnr_std" in real.record_problem(many) and real.record_problem(seeds) is None
    assert "nor a per-seed one" in real.record_problem(no_steps)
    assert "not a readable JSON record" in real.record_problem(broken)
    assert real.record_problem(one) is None and real.record_problem(tmp_path / "new.json") is None


def _seed_run(seed, psnr, steps, seconds=600.0):
    return {"seed": seed, "psnr": psnr, "steps": steps, "train_seconds": seconds, "load": {"before": [0.1, 0.2, 0.3]}}


def test_a_per_seed_record_takes_the_run_in_place_of_its_seeds(monkeypatch):
    monkeypatch.setattr(real, "oldest_commit", lambda commits: min(c for c in commits if c))  # git order: tested below
    old = {"commit": "aaa", "machine": "m0", "summary": {"psnr_mean": 1.0, "peer_psnr": 18.1},
           "runs": [_seed_run(0, 24.40, 4000), _seed_run(1, 24.50, 4100), _seed_run(2, 24.30, 4200)]}
    new = real.with_seed_run(old, _seed_run(1, 24.10, 3900, 599.0), "bbb", "configs/fern_cpu.txt")
    psnrs = [24.40, 24.10, 24.30]
    assert [r["seed"] for r in new["runs"]] == [0, 1, 2] and new["runs"][1]["psnr"] == 24.10
    assert new["runs"][1]["commit"] == "bbb" and new["runs"][1]["load_before"] == [0.1, 0.2, 0.3]
    assert new["runs"][0]["commit"] == "aaa" and new["runs"][0]["machine"] == "m0" and new["commit"] == "aaa"
    assert new["replaced_runs"][0]["psnr"] == 24.50 and new["depends"] == [*TRAINING_CODE, "configs/fern_cpu.txt"]
    assert new["summary"]["psnr_mean"] == round(float(np.mean(psnrs)), 2)
    assert new["summary"]["psnr_std"] == round(float(np.std(psnrs, ddof=1)), 2)
    assert new["summary"]["steps_per_second"] == round(12100 / 1799.0, 2) and new["summary"]["peer_psnr"] == 18.1
    assert len(old["runs"]) == 3 and old["runs"][1]["psnr"] == 24.50  # the record read is left as it was
    added = real.with_seed_run({"runs": [_seed_run(0, 24.0, 4000)]}, _seed_run(3, 24.2, 4000), "ccc", "c.txt")
    assert [r["seed"] for r in added["runs"]] == [0, 3] and "replaced_runs" not in added
    assert added["summary"]["psnr_std"] == round(float(np.std([24.0, 24.2], ddof=1)), 2)


def test_the_oldest_commit_is_the_one_furthest_behind_head(tmp_path):
    def git(*args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    commits = []
    for i in range(3):
        git("commit", "-q", "--allow-empty", "-m", f"c{i}")
        commits.append(git("rev-parse", "--short", "HEAD"))
    assert oldest_commit([commits[1], commits[0] + "+dirty", None, commits[2]], root=tmp_path) == commits[0] + "+dirty"
    assert oldest_commit([commits[2], commits[1]], root=tmp_path) == commits[1]
    assert oldest_commit([None], root=tmp_path) is None
