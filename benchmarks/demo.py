"""The README's first command measured: benchmarks/demo.json (the README's first Results row, its opening
line's minutes and docs/train.md's first config row).

    python -m benchmarks.demo          # alone on the machine: about 4 minutes on 2 CPU cores

Runs ``enerf train --config configs/demo.txt`` in a child process into a fresh ``--basedir`` (a temporary
folder, so an earlier ``runs/demo`` is neither resumed nor touched), with the embedded scene made first
when ``data/demo`` is missing (its making is not in the wall time), then writes the run's held-out PSNR,
SSIM, LPIPS (or why there is none), steps, training time, the whole command's wall time, its peak
resident memory (``getrusage`` of the child, what ``/usr/bin/time -v`` prints as "Maximum resident set
size"), the periodic evaluations and the load average before it. A record of another commit moves
under ``previous``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import ROOT, TRAINING_CODE, as_run, git_commit, keep_previous, load_average, machine, write_record

RECORD = ROOT / "benchmarks" / "demo.json"
CONFIG = "configs/demo.txt"
DEPENDS = TRAINING_CODE + ["enerf/synthetic", CONFIG]
WHAT = ("the README's first command (enerf train --config configs/demo.txt): its training steps and the final "
        "held-out evaluation, alone on the machine; the embedded scene was made before (data/demo present), so its "
        "making is not in the wall time; peak_rss_gib: the child's maximum resident set size")


def train_command(basedir: str) -> list[str]:
    return ["enerf", "train", "--config", CONFIG, "--basedir", basedir]


def run_record(metrics: dict, wall_seconds: float, peak_rss_kib: int) -> dict:
    """The record's figures from the run's metrics.json, the command's wall time and the child's peak RSS (KiB)."""
    history = [{"step": h["step"], "psnr": round(h["psnr"], 2)} for h in metrics["history"]]
    return {"summary": {"psnr": round(metrics["psnr"], 2), "ssim": round(metrics["ssim"], 3),
                        "wall_seconds": round(wall_seconds), "peak_rss_gib": round(peak_rss_kib / 2**20, 2)},
            "psnr": metrics["psnr"], "ssim": metrics["ssim"], "lpips": metrics.get("lpips"),
            "lpips_error": metrics.get("lpips_error"), "ssim_window": metrics.get("ssim_window"),
            "steps": metrics["steps"], "train_seconds": round(metrics["train_seconds"], 1),
            "wall_seconds": round(wall_seconds, 1), "peak_rss_gib": round(peak_rss_kib / 2**20, 2), "history": history}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", default=str(RECORD))
    args = parser.parse_args(argv)
    if not (ROOT / "data" / "demo").is_dir():
        from enerf.synthetic.scene import make_synthetic_scene

        make_synthetic_scene(ROOT / "data" / "demo")
    load, commit = load_average(), git_commit()
    with tempfile.TemporaryDirectory(prefix="enerf_demo_") as basedir:
        tic = time.perf_counter()
        done = subprocess.run(as_run(train_command(basedir)), cwd=ROOT)
        wall = time.perf_counter() - tic
        if done.returncode != 0:
            print(f"benchmarks.demo: enerf train exited with {done.returncode}; nothing recorded", file=sys.stderr)
            return done.returncode
        metrics = json.loads((Path(basedir) / "demo" / "metrics.json").read_text())
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    record = {"commit": commit, "depends": DEPENDS, "what": WHAT, "command": "python -m benchmarks.demo",
              "machine": machine(), "load_before": load, **run_record(metrics, wall, peak_kib)}
    write_record(args.record, keep_previous(record, args.record))
    s = record["summary"]
    print(f"demo: {s['psnr']:.2f} dB, SSIM {s['ssim']:.3f}, {record['steps']} steps, {s['wall_seconds']} s wall, "
          f"peak RSS {s['peak_rss_gib']:.2f} GiB (load before {' '.join(map(str, load))}) -> {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
