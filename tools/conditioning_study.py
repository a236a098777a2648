"""Vanilla vs E-NeRF on the embedded scene: run a grid of (conditioning, layers, seed) with
one config, one process per run (sequential, so timings are not disturbed), and print a
table of held-out PSNR / SSIM, wall time and peak RSS per run, with mean ± std over seeds
and Δ vs vanilla.

Finished runs (metrics.json present) are read, not rerun, so the study can be resumed.

    python tools/conditioning_study.py                                    # none vs row, seeds 0 1 2
    python tools/conditioning_study.py --modes none row col rowcol row:all --seeds 0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run_one(config: str, basedir: Path, mode: str, layers: str, seed: int, extra: list[str]) -> dict:
    expname = f"{mode}-{layers}-s{seed}"
    metrics_path = basedir / expname / "metrics.json"
    if metrics_path.is_file():
        return json.loads(metrics_path.read_text())
    cmd = [sys.executable, "-m", "enerf.cli", "train", "--config", config, "--conditioning", mode,
           "--conditioned_layers", layers, "--seed", str(seed), "--basedir", str(basedir),
           "--expname", expname, "--quiet", *extra]
    tic = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - tic
    if status != 0:
        raise SystemExit(f"run {expname} failed (exit status {status}); command: {' '.join(cmd)}")
    metrics = json.loads(metrics_path.read_text())
    metrics["wall_seconds"] = wall
    metrics["peak_rss_gb"] = usage.ru_maxrss / 1024**2  # ru_maxrss is in KiB on Linux
    metrics_path.write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


def mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/demo.txt")
    parser.add_argument("--basedir", default="runs/study")
    parser.add_argument("--modes", nargs="+", default=["none", "row"],
                        help="conditioning modes; MODE:LAYERS picks --conditioned_layers (default hidden)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("extra", nargs="*", help="more flags for enerf train, after --")
    args = parser.parse_args()

    results: dict[str, list[dict]] = {}
    for spec in args.modes:
        mode, _, layers = spec.partition(":")
        for seed in args.seeds:
            results.setdefault(spec, []).append(
                run_one(args.config, Path(args.basedir), mode, layers or "hidden", seed, args.extra))

    base = [m["psnr"] for m in results.get("none", [])]
    print(f"config {args.config}, seeds {args.seeds}")
    print("| conditioning | per-seed PSNR (dB) | PSNR mean ± std | Δ vs none (dB) | SSIM | train s | wall s | peak RSS GB |")
    print("|---|---|---|---|---|---|---|---|")
    for spec, runs in results.items():
        psnrs = [m["psnr"] for m in runs]
        delta = f"{statistics.mean(psnrs) - statistics.mean(base):+.2f}" if base else "n/a"
        walls = [m.get("wall_seconds") for m in runs if m.get("wall_seconds")]
        rss = [m.get("peak_rss_gb") for m in runs if m.get("peak_rss_gb")]
        print(f"| {spec} | {', '.join(f'{p:.2f}' for p in psnrs)} | {mean_std(psnrs)} | {delta} | "
              f"{mean_std([m['ssim'] for m in runs])} | {mean_std([m['train_seconds'] for m in runs])} | "
              f"{mean_std(walls) if walls else 'n/a'} | {f'{max(rss):.2f}' if rss else 'n/a'} |")


if __name__ == "__main__":
    main()
