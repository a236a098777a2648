"""Issue 47's fidelity runs: zero-config 10-minute training of a capture, with or without a fidelity
option (``--appearance affine``, ``--robust_trim F``, ``--visibility_loss W``, ``--gradient_scaling R``,
``--holdout far``), recorded per held-out view.

    python -m benchmarks.fidelity --name boardgame --datadir ../shared/data/captures/boardgame
    python -m benchmarks.fidelity --name boardgame_trim --datadir ../shared/data/captures/boardgame -- --robust_trim 0.1

Each call trains ``enerf train --datadir D --basedir runs/fid --expname NAME --time_budget 600 --splat_seconds 0
[FLAGS]`` in a child process: the field alone for 10 minutes (with no flag a capture run spends 7 minutes on the
field and 7 on its splats). The load average before it is recorded (run it alone on the machine). It then writes
under NAME in
``benchmarks/fidelity.json``: the command, the steps, the held-out PSNR on the mean appearance and with
NeRF-W's half-view fit (``psnr_fit_right``) and over the pixels a training camera sees (``psnr_seen``),
every view's PSNR, the worst view's distance below the mean,
and the wall time of each stage (loading, training, final evaluation) with the final evaluation's share
of the training time. ``--existing`` records a run already trained with that command instead (give the
load average it started under with ``--load``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.harness import (ROOT, TRAINING_CODE, as_run, git_commit, load_average, machine, oldest_commit, parse_load,
                                write_record)

RECORD = ROOT / "benchmarks" / "fidelity.json"
BASEDIR = "runs/fid"
FIELD_ALONE = ["--time_budget", "600", "--splat_seconds", "0"]  # the runs' budget: 10 minutes of the field, no splats
# what the records measure: the training and scoring code of a capture run
DEPENDS = TRAINING_CODE
WHAT = ("zero-config 10-minute runs of the captures' field (enerf train --datadir D --time_budget 600 --splat_seconds 0, "
        "the capture_cpu preset), with and "
        "without issue 47's fidelity options, each alone on the machine; PSNR on the mean appearance, "
        "psnr_fit_right: NeRF-W's left-half fit scored on the right half")


def train_command(name: str, datadir: str, flags: list[str]) -> list[str]:
    return ["enerf", "train", "--datadir", datadir, "--basedir", BASEDIR, "--expname", name, *FIELD_ALONE, *flags]


def entry(name: str, datadir: str, flags: list[str], load: list[float], commit: str | None) -> dict:
    """The record of the finished run ``runs/fid/NAME`` (its metrics.json)."""
    return {"command": shlex.join(train_command(name, datadir, flags)), "flags": flags, "commit": commit,
            "load_before": load, **run_entry(ROOT / BASEDIR / name)}


def run_entry(run: Path) -> dict:
    """What a finished run's ``RUN/metrics.json`` says: steps, held-out PSNR / SSIM (also with the
    half-view fit and on the seen pixels), every view, the worst view's distance below the mean, the
    wall time of each stage and the final evaluation's share of the training time."""
    metrics = json.loads((run / "metrics.json").read_text())
    views = [{"view": p["view"], "psnr": p["psnr"], "psnr_fit_right": p.get("psnr_fit_right"),
              "psnr_seen": p.get("psnr_seen"), "seen_fraction": p.get("seen_fraction")} for p in metrics["per_image"]]
    psnrs = np.array([v["psnr"] for v in views])
    wall = metrics["wall_seconds"]
    return {
        "steps": metrics["steps"],
        "train_seconds": metrics["train_seconds"],
        "wall_seconds": wall,
        "final_eval_share": wall["eval"] / metrics["train_seconds"],
        "psnr": metrics["psnr"],
        "psnr_fit_right": metrics.get("psnr_fit_right"),
        "psnr_seen": metrics.get("psnr_seen"),  # over the pixels a training camera sees (enerf.train.evaluate.seen_scores)
        "seen_fraction": metrics.get("seen_fraction"),
        "ssim": metrics["ssim"],
        "worst_view": int(views[int(np.argmin(psnrs))]["view"]),
        "worst_below_mean": float(psnrs.mean() - psnrs.min()),
        "views": views,
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name", required=True, help="the run's name (runs/fid/NAME) and its key in the record")
    parser.add_argument("--datadir", required=True, help="the capture folder")
    parser.add_argument("--existing", action="store_true", help="record runs/fid/NAME, already trained")
    parser.add_argument("--load", default="", help="--existing: the 1-, 5-, 15-minute load averages it started under")
    parser.add_argument("--commit", default="", help="--existing: the commit it was trained at (default: HEAD)")
    parser.add_argument("--record", default=str(RECORD), help="the JSON record to add the run to")
    parser.add_argument("--what", default="", help="the record's protocol line (default: the record's own, else "
                        "issue 47's fidelity runs')")
    args = parser.parse_args(argv)
    if args.existing:
        if not (ROOT / BASEDIR / args.name / "metrics.json").is_file():
            print(f"fidelity: {BASEDIR}/{args.name}/metrics.json not found; train it first (drop --existing)",
                  file=sys.stderr)
            return 2
        load = parse_load(args.load)
        if load is None:
            print(f"fidelity: --load {args.load!r} is not three numbers (the 1-, 5-, 15-minute load averages)",
                  file=sys.stderr)
            return 2
        commit = args.commit or git_commit()
    else:
        load, commit = load_average(), git_commit()
        done = subprocess.run(as_run(train_command(args.name, args.datadir, flags)), cwd=ROOT)
        if done.returncode != 0:
            return done.returncode
    path = Path(args.record)
    record = json.loads(path.read_text()) if path.is_file() else {}
    record.update({"machine": machine(), "depends": DEPENDS})
    record["what"] = args.what or record.get("what") or WHAT  # a record of its own (capture_defaults.json) keeps its own
    record.setdefault("runs", {})[args.name] = entry(args.name, args.datadir, flags, load, commit)
    record["commit"] = oldest_commit([run.get("commit") for run in record["runs"].values()])  # the oldest code measured
    write_record(path, record)
    run = record["runs"][args.name]
    print(f"{args.name}: {run['psnr']:.2f} dB ({run['steps']} steps), fitted right halves {run['psnr_fit_right']:.2f}, "
          f"worst view {run['worst_view']} {run['worst_below_mean']:.2f} dB below the mean -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
