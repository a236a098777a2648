"""Vanilla vs E-NeRF on the embedded scene: run a grid of (conditioning, layers, seed) with
one config, one process per run (sequential, so timings are not disturbed), and print a
table of held-out PSNR / SSIM, wall time and peak RSS per run, with mean ± std over seeds
and Δ vs vanilla.

The grid is ``enerf compare``'s (``enerf.compare``): runs live in
``<basedir>/runs/<scene>-<mode>-s<seed>/``; finished runs are read, not rerun, and a cut-off
run is resumed, so the study can be resumed. Mode specs as ``enerf compare --modes``:
``MODE`` (the config's ``conditioned_layers``, ``hidden`` in the demo) or ``MODE:LAYERS``.

    python -m studies.conditioning_study                                    # none vs row, seeds 0 1 2
    python -m studies.conditioning_study --modes none row col rowcol row:all --seeds 0
    python -m studies.conditioning_study --basedir runs/study_noraw --modes none --seeds 1 2 -- --raw_noise_std 0
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from enerf.errors import EnerfError

from benchmarks.grid import finished_metrics, grid_runs, mean_std, run_grid_runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/demo.txt")
    parser.add_argument("--scene", default="demo", help="scene name (or folder) of every run")
    parser.add_argument("--basedir", default="runs/study", help="the grid's folder (enerf compare --out)")
    parser.add_argument("--modes", nargs="+", default=["none", "row"],
                        help="conditioning modes; MODE:LAYERS picks --conditioned_layers")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS") or 0),
                        help="OMP_NUM_THREADS of each run (default: this process's OMP_NUM_THREADS, "
                             "else 0: enerf compare's choice, all cores)")
    parser.add_argument("extra", nargs="*", help="more flags for enerf train, after --")
    args = parser.parse_args()

    try:
        runs = grid_runs("nerf", [args.scene], args.modes, args.seeds, Path(args.basedir), args.config, args.extra)
        run_grid_runs("nerf", runs, args.extra, jobs=1, threads=args.threads)
    except EnerfError as err:
        print(f"conditioning_study: {err}", file=sys.stderr)
        return 2

    print(f"config {args.config}, seeds {args.seeds}")
    print(study_table(runs, args.scene, args.modes))
    return 0


def study_table(runs, scene: str, modes: list[str]) -> str:
    """Markdown: per-seed and mean ± std PSNR, Δ vs ``none``, SSIM, training and wall seconds,
    peak RSS of each mode spec's finished runs."""
    base = [m["psnr"] for m in finished_metrics(runs, scene, "none")]
    lines = ["| conditioning | per-seed PSNR (dB) | PSNR mean ± std | Δ vs none (dB) | SSIM | train s | wall s | peak RSS GB |",
             "|---|---|---|---|---|---|---|---|"]
    for spec in modes:
        metrics = finished_metrics(runs, scene, spec)
        records = [r.record for r in runs if r.mode.spec == spec]
        psnrs = [m["psnr"] for m in metrics]
        delta = f"{statistics.mean(psnrs) - statistics.mean(base):+.2f}" if base else "n/a"
        walls = [r["wall_seconds"] for r in records if r.get("wall_seconds")]
        rss = [r["peak_rss_gb"] for r in records if r.get("peak_rss_gb")]
        lines.append(f"| {spec} | {', '.join(f'{p:.2f}' for p in psnrs)} | {mean_std(psnrs)} | {delta} | "
                     f"{mean_std([m['ssim'] for m in metrics])} | {mean_std([m['train_seconds'] for m in metrics])} | "
                     f"{mean_std(walls) if walls else 'n/a'} | {f'{max(rss):.2f}' if rss else 'n/a'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
