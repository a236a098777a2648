"""benchmarks.demo: the README's first-row record from a run's metrics.json."""

from __future__ import annotations

import pytest

from benchmarks.demo import run_record
from benchmarks.pages.records import record


def test_run_record_rounds_as_the_pages_print():
    metrics = {"psnr": 25.73113202518057, "ssim": 0.79249, "lpips": None, "lpips_error": "no weights",
               "ssim_window": "gaussian 11x11, sigma 1.5", "steps": 3000, "train_seconds": 183.44,
               "history": [{"step": 500, "psnr": 20.871, "train_psnr": 19.0}, {"step": 3000, "psnr": 25.731}]}
    r = run_record(metrics, wall_seconds=201.46, peak_rss_kib=985_661)  # /usr/bin/time -v's kbytes are KiB
    assert r["summary"] == {"psnr": 25.73, "ssim": 0.792, "wall_seconds": 201, "peak_rss_gib": 0.94}
    assert r["peak_rss_gib"] == pytest.approx(985_661 * 1024 / 1024**3, abs=0.005)
    assert r["history"] == [{"step": 500, "psnr": 20.87}, {"step": 3000, "psnr": 25.73}]
    assert (r["steps"], r["train_seconds"], r["wall_seconds"]) == (3000, 183.4, 201.5)


def test_the_committed_record_has_what_the_pages_read():
    demo = record("demo")
    assert set(demo["summary"]) == {"psnr", "ssim", "wall_seconds", "peak_rss_gib"}
    assert demo["summary"]["psnr"] == round(demo["psnr"], 2) and demo["steps"] >= demo["history"][-1]["step"]
