"""The phone-video recipe end to end, each command timed: benchmarks/video_recipe.json.

    python -m benchmarks.video_recipe                       # ../shared/data/video/beer.mp4, run alone on the machine
    python -m benchmarks.video_recipe --existing --video_seconds V --train_seconds T --load "B1 B5 B15"

Runs ``enerf data video VIDEO --out OUT/capture`` and then ``enerf train --datadir OUT/capture --basedir OUT``
(no other flag, as docs/walkthrough.md says), each in a child process with its wall time, and writes the
record: frames registered, held-out PSNR / SSIM, per-view PSNR, steps, the wall time of each stage
(posing, loading, training, final evaluation, the preview video after metrics.json) and the load average
before. ``--existing`` records a recipe already run with those commands, timed outside (wall seconds of
each command and the load average before the first).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness import ROOT, git_commit, load_average, machine, write_record

DEPENDS = ["enerf/ingest", "enerf/nn", "enerf/fields", "enerf/render", "enerf/train", "enerf/data", "enerf/cameras",
           "enerf/optim", "enerf/config", "enerf/metrics.py"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--video", default="../shared/data/video/beer.mp4")
    parser.add_argument("--out", default="runs/beer_recipe", help="folder of the scene (OUT/capture) and the run")
    parser.add_argument("--record", default="benchmarks/video_recipe.json")
    parser.add_argument("--existing", action="store_true", help="record a recipe run before (give its times)")
    parser.add_argument("--video_seconds", type=float, help="with --existing: wall time of enerf data video")
    parser.add_argument("--train_seconds", type=float, help="with --existing: wall time of enerf train")
    parser.add_argument("--load", help="with --existing: the load averages before, 'B1 B5 B15'")
    return parser.parse_args()


def timed(cmd: list[str]) -> float:
    """Wall seconds of CMD run in a child process (its output goes to ours); exits when it fails."""
    start = time.perf_counter()
    if subprocess.run(cmd, cwd=ROOT).returncode:
        sys.exit(f"video_recipe: {' '.join(cmd)} failed")
    return time.perf_counter() - start


def main() -> int:
    args = parse_args()
    scene = run = f"{args.out}/capture"  # the run folder is named after the scene folder
    commands = [["enerf", "data", "video", args.video, "--out", scene],
                ["enerf", "train", "--datadir", scene, "--basedir", args.out]]
    if args.existing:
        if args.video_seconds is None or args.train_seconds is None or not args.load:
            sys.exit("video_recipe: --existing needs --video_seconds, --train_seconds and --load")
        seconds, load = [args.video_seconds, args.train_seconds], [float(x) for x in args.load.split()]
    else:
        load = load_average()
        seconds = [timed(cmd) for cmd in commands]
    metrics_path = ROOT / run / "metrics.json"
    if not metrics_path.is_file():
        sys.exit(f"video_recipe: no {metrics_path}; run the recipe first")
    metrics = json.loads(metrics_path.read_text())
    frames = json.loads((ROOT / scene / "transforms.json").read_text())["frames"]
    parts = metrics["wall_seconds"]
    record = {
        "what": "a phone video to a trained scene with no configuration: enerf data video, then enerf train "
                "--datadir with no other flag (10 minutes of training, the final held-out evaluation, the "
                "preview video); each command's wall time",
        "command": "python -m benchmarks.video_recipe --video " + args.video,
        "recipe": " && ".join(" ".join(c) for c in commands),
        "machine": machine(), "commit": git_commit(), "depends": DEPENDS, "load_before": load,
        "registered": len(frames), "psnr": metrics["psnr"], "ssim": metrics["ssim"], "steps": metrics["steps"],
        "train_seconds": metrics["train_seconds"], "wall_parts": parts,
        "per_view_psnr": {str(p["view"]): p["psnr"] for p in metrics["per_image"]},
        "video_seconds": seconds[0], "train_command_seconds": seconds[1],
        "total_seconds": sum(seconds), "total_minutes": sum(seconds) / 60,
    }
    write_record(ROOT / args.record, record, indent=1)
    print(f"{len(frames)} frames, {metrics['psnr']:.2f} dB, {sum(seconds) / 60:.1f} min in all; wrote {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
