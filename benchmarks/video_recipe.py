"""The phone-video recipe end to end, each command timed: benchmarks/video_recipe.json.

    python -m benchmarks.video_recipe                       # ../shared/data/video/beer.mp4, run alone on the machine
    python -m benchmarks.video_recipe --existing --video_seconds V --train_seconds T --load "B1 B5 B15" --commit C

Runs ``enerf data video VIDEO --out OUT/capture`` and then ``enerf train --datadir OUT/capture --basedir OUT``
(no other flag, as docs/walkthrough.md says), each in a child process with its wall time, and writes the
record: frames registered, and what the run's metrics.json says (``benchmarks.fidelity.run_entry``: the
field's held-out PSNR / SSIM, every view, the worst view, the wall time of each of the field's stages; the
splats' held-out PSNR / SSIM, count and bake time), the time of each command and the load average before.
``--existing`` records a recipe already run with those commands, timed outside (wall seconds of each
command, the load average before the first, the commit it ran at).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from benchmarks.fidelity import DEPENDS as TRAIN_DEPENDS, run_entry
from benchmarks.harness import ROOT, Timer, as_run, command_line, git_commit, load_average, machine, parse_load, write_record

DEPENDS = ["enerf/ingest", *TRAIN_DEPENDS]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--video", default="../shared/data/video/beer.mp4")
    parser.add_argument("--out", default="runs/beer_recipe", help="folder of the scene (OUT/capture) and the run")
    parser.add_argument("--record", default="benchmarks/video_recipe.json")
    parser.add_argument("--existing", action="store_true", help="record a recipe run before (give its times)")
    parser.add_argument("--video_seconds", type=float, help="with --existing: wall time of enerf data video")
    parser.add_argument("--train_seconds", type=float, help="with --existing: wall time of enerf train")
    parser.add_argument("--load", help="with --existing: the load averages before, 'B1 B5 B15'")
    parser.add_argument("--commit", default="", help="with --existing: the commit it ran at (default: HEAD)")
    return parser.parse_args(argv)


def timed(cmd: list[str]) -> float:
    """Wall seconds of CMD run in a child process (its output goes to ours); exits when it fails."""
    with Timer() as clock:
        failed = subprocess.run(as_run(cmd), cwd=ROOT).returncode
    if failed:
        sys.exit(f"video_recipe: {' '.join(cmd)} failed")
    return clock.seconds


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    scene = f"{args.out}/capture"  # the run folder is named after the scene folder: the same path
    commands = [["enerf", "data", "video", args.video, "--out", scene],
                ["enerf", "train", "--datadir", scene, "--basedir", args.out]]
    if args.existing:
        load = parse_load(args.load or "")
        if args.video_seconds is None or args.train_seconds is None or load is None:
            sys.exit("video_recipe: --existing needs --video_seconds, --train_seconds and --load 'B1 B5 B15'")
        seconds, commit = [args.video_seconds, args.train_seconds], args.commit or git_commit()
    else:
        load, commit = load_average(), git_commit()
        seconds = [timed(cmd) for cmd in commands]
    if not (ROOT / scene / "metrics.json").is_file():
        sys.exit(f"video_recipe: no {scene}/metrics.json; run the recipe first (drop --existing)")
    frames = json.loads((ROOT / scene / "transforms.json").read_text())["frames"]
    run = run_entry(ROOT / scene)
    splats = json.loads((ROOT / scene / "metrics.json").read_text()).get("splats") or {}
    record = {
        "what": "a phone video to a trained scene with no configuration: enerf data video, then enerf train "
                "--datadir with no other flag (the field's time budget, its held-out evaluation, the bake into "
                "splats, their held-out evaluation, the preview video); each command's wall time",
        "command": command_line([sys.argv[0], *(sys.argv[1:] if argv is None else argv)]),
        "recipe": " && ".join(" ".join(c) for c in commands),
        "machine": machine(), "commit": commit, "depends": DEPENDS, "load_before": load,
        "registered": len(frames), **run,
        "splats": {k: splats.get(k) for k in ("psnr", "ssim", "splat_count", "uncovered_max")}
                  | {"bake_seconds": (splats.get("bake") or {}).get("seconds"),
                     "fit_steps": (splats.get("bake") or {}).get("fit_steps")},
        "video_seconds": seconds[0], "train_command_seconds": seconds[1],
        "total_seconds": sum(seconds), "total_minutes": sum(seconds) / 60,
    }
    write_record(ROOT / args.record, record, indent=1)
    print(f"{len(frames)} frames, the field {run['psnr']:.2f} dB, the splats {record['splats']['psnr'] or float('nan'):.2f} dB, "
          f"{sum(seconds) / 60:.1f} min in all; wrote {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
