"""benchmarks.marcher --collect: the README's grid-race record from one bench_marcher.json per seed."""

from __future__ import annotations

import json

import pytest

from benchmarks import marcher
from benchmarks.harness import ROOT


def _bench(seed: int, entry: dict, commit: str = "abc1234") -> dict:
    """A bench_marcher.json whose figures are a record's seed entry (unrounded = the rounded values)."""
    hier, grid, over = entry["hierarchical"], entry["torch_grid"], entry["overhead"]
    return {"seed": seed, "commit": commit, "machine": "2 CPU cores (test)", "load_before": entry["load_before"],
            "hierarchical": {**hier, "history": []},
            "torch_grid": {**{k: grid[k] for k in ("target_psnr", "reached", "seconds_to_target", "steps_to_target",
                                                   "time_ratio", "queries_per_ray_to_target", "fewer_queries",
                                                   "grid_update_queries_per_ray_to_target", "grid_occupied_at_target",
                                                   "final_psnr", "final_train_seconds", "steps")},
                           "rays_per_step": grid["rays_per_step_mean"], "queries_per_ray": grid["queries_per_ray_final"],
                           "history": []},
            "overhead": {**over, "samples_per_step_none": 1.0, "samples_per_step_row": 1.0}}


def _write(tmp_path, benches: list[dict]) -> list[str]:
    folders = []
    for b in benches:
        folder = tmp_path / f"seed{b['seed']}"
        folder.mkdir()
        (folder / "bench_marcher.json").write_text(json.dumps(b))
        folders.append(str(folder))
    return folders


def test_collect_rebuilds_the_committed_record(tmp_path):
    """From per-seed files holding the committed record's figures, the collector writes that record's
    seeds and summary again (the summary the README's rows print)."""
    committed = json.loads((ROOT / "benchmarks" / "marcher_race.json").read_text())
    benches = [_bench(int(seed), entry) for seed, entry in committed["seeds"].items()]
    out = tmp_path / "race.json"
    record = marcher.collect(_write(tmp_path, benches), out)
    for seed, entry in committed["seeds"].items():  # the final ratio comes back from the rounded final queries per
        got = record["seeds"][seed]                   # ray, so its last digit may differ from the raw ratio's
        assert got["torch_grid"].pop("fewer_queries_final") == pytest.approx(
            entry["torch_grid"]["fewer_queries_final"], abs=0.011)
        assert got == {**entry, "torch_grid": {k: v for k, v in entry["torch_grid"].items()
                                               if k != "fewer_queries_final"}}
    assert record["summary"] == committed["summary"]
    assert json.loads(out.read_text())["depends"] == committed["depends"]


def test_collect_summary_by_hand(tmp_path):
    """Two seeds, one short of its target: the summary's figures worked out by hand."""
    base = {"load_before": "0.10 0.20 0.30",
            "hierarchical": {"psnr": 27.0, "train_seconds": 300.2, "steps": 4000, "queries_per_ray": 32.0},
            "torch_grid": {"target_psnr": 27.0, "reached": True, "seconds_to_target": 150.4, "steps_to_target": 5000,
                           "time_ratio": 0.501, "queries_per_ray_to_target": 8.0, "fewer_queries": 4.0,
                           "grid_update_queries_per_ray_to_target": 1.5, "grid_occupied_at_target": 0.3,
                           "rays_per_step_mean": 700.4, "final_psnr": 27.01, "final_train_seconds": 150.4, "steps": 5000,
                           "queries_per_ray_final": 10.0},
            "overhead": {"ratio_row_over_none": 1.0504, "step_seconds_none": 0.02, "step_seconds_row": 0.021, "reps": 60}}
    short = json.loads(json.dumps(base))
    short["torch_grid"].update(reached=False, seconds_to_target=None, steps_to_target=None, time_ratio=None,
                               queries_per_ray_to_target=None, fewer_queries=None, final_psnr=26.75,
                               queries_per_ray_final=8.0, grid_update_queries_per_ray_to_target=None,
                               grid_occupied_at_target=None)
    short["overhead"]["ratio_row_over_none"] = 1.0701
    record = marcher.collect(_write(tmp_path, [_bench(0, base), _bench(1, short)]), tmp_path / "r.json")
    assert record["seeds"]["0"]["torch_grid"]["time_ratio"] == 0.5
    assert record["seeds"]["0"]["hierarchical"]["train_seconds"] == 300
    assert record["summary"] == {
        "speed": {"reached": 1, "time_ratio_min": 0.5, "time_ratio_max": 0.5, "short_db_max": pytest.approx(0.25),
                  "fewer_queries_min": 3.2, "fewer_queries_max": 4.0},
        "overhead": {"ratio_row_over_none_min": 1.05, "ratio_row_over_none_max": 1.07}}


def test_collect_keeps_the_older_record_as_previous(tmp_path):
    committed = json.loads((ROOT / "benchmarks" / "marcher_race.json").read_text())
    out = tmp_path / "race.json"
    out.write_text(json.dumps({**committed, "commit": "0000000"}))
    benches = [_bench(int(seed), entry, commit="1111111") for seed, entry in committed["seeds"].items()]
    record = marcher.collect(_write(tmp_path, benches), out)
    assert record["previous"]["commit"] == "0000000" and "previous" not in record["previous"]
    assert record["commit"] == "1111111"


def test_collect_refuses_mixed_commits(tmp_path):
    committed = json.loads((ROOT / "benchmarks" / "marcher_race.json").read_text())
    benches = [_bench(int(seed), entry, commit=f"c{seed}") for seed, entry in committed["seeds"].items()]
    with pytest.raises(SystemExit, match="different commits"):
        marcher.collect(_write(tmp_path, benches), tmp_path / "r.json")


@pytest.mark.parametrize("damage, message", [("truncated", "is not a bench_marcher record"),
                                             ("no overhead", "has no 'overhead'")])
def test_collect_names_a_malformed_bench_file(tmp_path, damage, message):
    committed = json.loads((ROOT / "benchmarks" / "marcher_race.json").read_text())
    benches = [_bench(int(seed), entry) for seed, entry in committed["seeds"].items()]
    if damage == "no overhead":
        del benches[1]["overhead"]
    folders = _write(tmp_path, benches)
    if damage == "truncated":
        path = tmp_path / "seed1" / "bench_marcher.json"
        path.write_text(path.read_text()[:40])
    with pytest.raises(SystemExit, match=message) as failed:
        marcher.collect(folders, tmp_path / "r.json")
    assert "seed1" in str(failed.value) and not (tmp_path / "r.json").exists()
