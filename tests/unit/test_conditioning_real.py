"""benchmarks.conditioning_real: the README's vanilla-vs-E-NeRF row from enerf compare's folders."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from scipy import stats

from benchmarks import conditioning_real
from benchmarks.harness import ROOT

COMMITTED = json.loads((ROOT / "benchmarks" / "conditioning_real.json").read_text())


def _paired(values: list[float], baseline: list[float]) -> tuple[float, float, float]:
    """Δ of means and the paired 95 % t interval, by scipy."""
    d = np.asarray(values) - np.asarray(baseline)
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half)


@pytest.mark.parametrize("scene", ["fern", "lego"])
def test_committed_deltas_are_the_paired_t_intervals_of_the_seeds(scene):
    rows = {r["mode"]: r for r in COMMITTED[scene]["rows"]}
    none = rows["none"]["psnr_unrounded"]
    for mode, row in rows.items():
        assert row["psnr_mean"] == round(float(np.mean(row["psnr_unrounded"])), 2)
        assert row["psnr_std"] == round(float(np.std(row["psnr_unrounded"], ddof=1)), 2)
        if mode == "none":
            continue
        delta, low, high = _paired(row["psnr_unrounded"], none)
        assert row["psnr_delta"] == pytest.approx(delta, abs=1e-9)
        assert row["psnr_delta_ci95_unrounded"] == pytest.approx([low, high], abs=1e-9)


def _fake_compare(folder, scene: str, rows: list[dict]) -> None:
    """A compare folder whose compare.csv and metrics.json hold the committed rows' figures (the Δ and
    intervals as compare wrote them: the test above checks them against scipy)."""
    table = []
    for row in rows:
        psnr = row["psnr_unrounded"]
        line = {"task": "nerf", "scene": scene, "mode": row["mode"], "n_seeds": str(len(psnr)),
                "psnr_mean": repr(float(np.mean(psnr))), "psnr_std": repr(float(np.std(psnr, ddof=1))),
                "psnr_per_seed": ";".join(repr(p) for p in psnr), "ssim_mean": repr(row["ssim_mean"]),
                "ssim_std": repr(row["ssim_std"]), "psnr_delta_vs_none": "", "psnr_delta_ci95_low": "",
                "psnr_delta_ci95_high": "", "ssim_delta_vs_none": "", "ssim_delta_ci95_low": "",
                "ssim_delta_ci95_high": ""}
        if row["mode"] != "none":
            delta, (low, high) = row["psnr_delta"], row["psnr_delta_ci95_unrounded"]
            line.update(psnr_delta_vs_none=repr(delta), psnr_delta_ci95_low=repr(low), psnr_delta_ci95_high=repr(high),
                        ssim_delta_vs_none=repr(row["ssim_delta"]), ssim_delta_ci95_low=repr(row["ssim_delta_ci95"][0]),
                        ssim_delta_ci95_high=repr(row["ssim_delta_ci95"][1]))
        table.append(line)
        for seed, (steps, seconds) in enumerate(zip(row["steps"], row["train_seconds"])):
            run = folder / "runs" / f"{scene}-{row['mode']}-s{seed}"
            run.mkdir(parents=True)
            (run / "metrics.json").write_text(json.dumps({"steps": steps, "train_seconds": seconds + 0.04}))
    with open(folder / "compare.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)


def test_collect_rebuilds_the_committed_rows_and_summary(tmp_path):
    folders = {}
    for scene in ("fern", "lego"):
        folders[scene] = tmp_path / scene
        _fake_compare(folders[scene], scene, COMMITTED[scene]["rows"])
    loads = {scene: COMMITTED[scene]["load"] for scene in folders}
    record = conditioning_real.collect(folders, loads, tmp_path / "r.json")
    for scene in folders:
        assert record[scene]["command"] == COMMITTED[scene]["command"]
        assert record[scene]["rows"] == [{k: v for k, v in r.items() if k != "note"} for r in COMMITTED[scene]["rows"]]
    assert record["summary"] == pytest.approx(COMMITTED["summary"], abs=1e-9)
    assert record["depends"] == COMMITTED["depends"]


def test_a_missing_compare_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="compare.csv not found; run the compare first"):
        conditioning_real.collect({"fern": tmp_path}, {}, tmp_path / "r.json")


def test_an_unfinished_run_is_one_line(tmp_path):
    _fake_compare(tmp_path, "fern", COMMITTED["fern"]["rows"])
    (tmp_path / "runs" / "fern-row-s2" / "metrics.json").unlink()
    with pytest.raises(SystemExit, match=r"fern-row-s2/metrics.json not found; rerun the compare"):
        conditioning_real.collect({"fern": tmp_path}, {}, tmp_path / "r.json")
