"""How long scoring the held-out views of a trained capture takes on this machine, for the current
code and, beside it, another checkout of the code (the same views, the same pixels, the same metrics).

    git worktree add /tmp/before <commit>
    python -m benchmarks.scoring --capture fox=runs/fox/checkpoints/latest.pt=../shared/data/nerfstudio/fox \\
        --before /tmp/before --repeats 2 --record benchmarks/scoring.json
    enerf train --datadir ../shared/data/captures/boardgame --basedir runs/zero_config   # 10 minutes, no config
    python -m benchmarks.scoring --run boardgame=runs/zero_config/boardgame --record benchmarks/scoring.json

Each measurement is a fresh process started in the code's folder (so that ``import enerf`` reads
that checkout): it loads the run and its scene (not timed), then renders and scores every held-out
view as ``enerf eval`` does (``enerf.train.evaluate.evaluate_views``, full resolution, torch's
default threads: all cores), timed in wall and CPU seconds. The two checkouts alternate,
``--repeats`` times each per capture; the minimum is the figure. The record keeps every run, each
view's PSNR under both (the two codes must render the same images: the largest difference is
recorded) and the load averages before and after each run. ``--run`` adds a finished training run's
wall times: how much of a 10-minute run its final evaluation and its periodic checks take.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import ROOT, command_line, git_commit, keep_previous, load_average, machine, write_record

# what the figures depend on (benchmarks/pages: a later commit to these makes the record stale)
DEPENDS = ["enerf/render", "enerf/fields", "enerf/nn", "enerf/train/evaluate.py", "enerf/metrics.py",
           "enerf/loaded_run.py"]

# Run in the checkout's folder: loads the run, then times the scoring of its held-out views.
_CHILD = r"""
import json, sys, time
from pathlib import Path
import torch
from enerf.config import DATA_ROOT
from enerf.loaded_run import load_run
from enerf.train.evaluate import evaluate_views
run = load_run(sys.argv[1], DATA_ROOT, "cpu", datadir=sys.argv[2], images=True)
scene, views = run.scene, [int(v) for v in run.scene.i_test]
wall, cpu = time.perf_counter(), time.process_time()
per = evaluate_views(scene, views, run.fields, run.cfg.render, run.device, None, renderer=run.renderer,
                     progress=False)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"seconds": wall, "cpu_seconds": cpu, "views": views, "width": scene.width,
                  "height": scene.height, "threads": torch.get_num_threads(),
                  "psnr": [p["psnr"] for p in per], "ssim": [p["ssim"] for p in per]}))
"""


def measure(code: Path, ckpt: str, datadir: str) -> dict:
    """One scoring run of ``code``'s enerf in a fresh process (``_CHILD``), with the load averages."""
    before = load_average()
    out = subprocess.run([sys.executable, "-c", _CHILD, str(Path(ckpt).resolve()), str(Path(datadir).resolve())],
                         cwd=code, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"scoring with {code} failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {**result, "load_before": before, "load_after": load_average()}


def summarize(runs: dict[str, list[dict]]) -> dict:
    """The figures of one capture: the fastest run of each code, the speed-up, seconds per view and
    per million pixels, the PSNR of each and their largest difference over views."""
    best = {side: min(items, key=lambda r: r["seconds"]) for side, items in runs.items()}
    after = best["after"]
    pixels = after["width"] * after["height"] * len(after["views"])
    out = {"views": len(after["views"]), "width": after["width"], "height": after["height"],
           "seconds": round(after["seconds"], 1), "seconds_per_view": round(after["seconds"] / len(after["views"]), 2),
           "seconds_per_megapixel": round(after["seconds"] / pixels * 1e6, 2),
           "psnr": round(sum(after["psnr"]) / len(after["psnr"]), 3)}
    if "before" in best:
        prev = best["before"]
        out.update({"before_seconds": round(prev["seconds"], 1), "speedup": round(prev["seconds"] / after["seconds"], 2),
                    "before_psnr": round(sum(prev["psnr"]) / len(prev["psnr"]), 3),
                    "largest_view_psnr_difference": round(max(abs(a - b) for a, b in zip(after["psnr"], prev["psnr"])), 4)})
    return out


def run_share(folder: Path) -> dict:
    """A training run's wall times (metrics.json ``wall_seconds``: load, the training loop with its
    periodic evaluations, the final evaluation), its training seconds, and the final evaluation's
    share of the training time; the periodic evaluations' share from the loop's wall time less the
    training seconds (checkpoint writing included)."""
    metrics = json.loads((folder / "metrics.json").read_text())
    wall, train = metrics["wall_seconds"], metrics["train_seconds"]
    return {"folder": str(folder), "steps": metrics["steps"], "psnr": metrics["psnr"], "train_seconds": train,
            "wall_seconds": wall, "final_evaluation_share": wall["eval"] / train,
            "periodic_evaluations_and_checkpoints_share": (wall["train"] - train) / train,
            "evaluations": len(metrics["history"])}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--capture", action="append", default=[], metavar="NAME=CKPT=DATADIR",
                        help="a trained capture: its name, checkpoint and scene folder (repeatable)")
    parser.add_argument("--before", default="", help="another checkout of the code to time beside this one "
                        "(e.g. a git worktree of an earlier commit)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each code per capture, alternating")
    parser.add_argument("--run", action="append", default=[], metavar="NAME=RUN_FOLDER",
                        help="a finished training run whose metrics.json's wall times go into the record: "
                        "the final evaluation's and the training loop's seconds, and the evaluation's share")
    parser.add_argument("--record", default="", help="write the record here (JSON); with --run and no --capture, "
                        "add the runs to the record already there")
    args = parser.parse_args(argv)
    if not args.capture and not args.run:
        parser.error("nothing to measure: give --capture NAME=CKPT=DATADIR or --run NAME=RUN_FOLDER")
    for spec, parts in [(c, 3) for c in args.capture] + [(r, 2) for r in args.run]:
        if len(spec.split("=", parts - 1)) != parts:
            parser.error(f"{spec!r} is not NAME=CKPT=DATADIR (--capture) or NAME=RUN_FOLDER (--run)")
    codes = {"after": ROOT, **({"before": Path(args.before).resolve()} if args.before else {})}
    record = {"what": "wall seconds to render and score every held-out view of a trained capture at full "
                      "resolution (enerf eval's evaluate_views, torch's default threads), load excluded; "
                      "'before' is another checkout run alternately on the same machine",
              "depends": DEPENDS, "command": command_line(), "machine": machine(), "commit": git_commit(),
              "before_commit": git_commit(codes["before"]) if "before" in codes else None, "summary": {}}
    for spec in args.capture:
        name, ckpt, datadir = spec.split("=", 2)
        runs: dict[str, list[dict]] = {side: [] for side in codes}
        for _ in range(args.repeats):
            for side, code in sorted(codes.items(), reverse=True):  # before, then after
                runs[side].append(measure(code, ckpt, datadir))
                print(f"{name} {side}: {runs[side][-1]['seconds']:.1f} s "
                      f"(load {runs[side][-1]['load_before'][0]})", flush=True)
        record[name] = runs
        record["summary"][name] = summarize(runs)
        print(json.dumps({name: record["summary"][name]}), flush=True)
    if not args.capture and args.record and Path(args.record).is_file():
        record = {**json.loads(Path(args.record).read_text()), "runs_command": command_line()}
    for spec in args.run:
        name, folder = spec.split("=", 1)
        record.setdefault("runs", {})[name] = run_share(Path(folder))
        print(json.dumps({name: record["runs"][name]}), flush=True)
    if args.record:
        write_record(args.record, keep_previous(record, args.record) if args.capture else record)


if __name__ == "__main__":
    main()
