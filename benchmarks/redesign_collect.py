"""Records of a restructuring that must change no figure (issue 65): the behaviour check and the step speed of
the tree before against the tree after.

    benchmarks/redesign_behaviour.sh BEFORE_TREE OUT/before     # one thread per run; the two may run side by side
    benchmarks/redesign_behaviour.sh AFTER_TREE OUT/after
    python -m benchmarks.redesign_collect behaviour OUT BEFORE_COMMIT AFTER_COMMIT --record benchmarks/behaviour_redesign4.json

    benchmarks/redesign_step_rate.sh BEFORE_TREE AFTER_TREE rates.jsonl      # alone on the machine
    python -m benchmarks.redesign_collect step_rate rates.jsonl BEFORE_TREE AFTER_TREE --record benchmarks/step_rate_redesign4.json

``behaviour`` compares every held-out figure of metrics.json (PSNR and SSIM; IoU and Chamfer-L1 for the shape
run) and, for the two bakes with no fit, metrics_splats.json and the PLY's sha256: ``equal`` per row, ``all_equal``.
``step_rate`` takes the median steps/s of each tree per config and their ratio, after over before.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path

# the runs of benchmarks/redesign_behaviour.sh, by folder name
COMMANDS = {
    "demo3000": "enerf train --config configs/demo.txt --eval_every 0 --no_lpips",
    "demo500": "enerf train --config configs/demo.txt --iters 500 --eval_every 0 --no_lpips",
    "fern800": "enerf train --config configs/fern_cpu.txt --iters 800 --time_budget 0 --eval_every 0 --no_lpips "
               "--datadir ../shared/data/nerf_llff_data/fern",
    "grid500": "enerf train --config configs/demo_grid.txt --iters 500 --eval_every 0 --no_lpips",
    "shape300": "enerf shape train --config configs/shape_cpu.txt --iters 300",
    "fox300": "enerf train --datadir ../shared/data/nerfstudio/fox --iters 300 --time_budget 0 --splat_seconds 0 "
              "--eval_every 0 --no_lpips --eval_stride 4",
}
BAKED = ("demo500", "fox300")  # runs whose starting splats (--bake_seconds 0) are compared too
CONFIGS = {"configs/demo_grid.txt": "demo_grid", "configs/fern_cpu.txt": "fern_cpu", "": "capture (fox, no config)"}


def _metrics(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text())


def behaviour_rows(out: Path) -> list[dict]:
    """One row per command: the figures of ``out/before`` and ``out/after`` and whether they are equal."""
    rows = []
    for run, command in COMMANDS.items():
        a, b = _metrics(out / "before" / run, "metrics.json"), _metrics(out / "after" / run, "metrics.json")
        keys = ("iou", "chamfer_l1") if run.startswith("shape") else ("psnr", "ssim")
        row = {"command": command, **{f"{k}_{side}": m[k] for k in keys for side, m in (("before", a), ("after", b))},
               "steps": b["steps"], "equal": all(a[k] == b[k] for k in keys)}
        rows.append(row)
    for run in BAKED:
        a, b = (_metrics(out / side / run, "metrics_splats.json") for side in ("before", "after"))
        ha, hb = (hashlib.sha256((out / side / run / "start.ply").read_bytes()).hexdigest() for side in ("before", "after"))
        rows.append({"command": f"enerf export splats --ckpt RUN_{run} --bake_seconds 0 --out start.ply; "
                                f"enerf eval --ckpt RUN_{run} --splats start.ply",
                     "psnr_before": a["psnr"], "psnr_after": b["psnr"], "uncovered_max_before": a.get("uncovered_max"),
                     "uncovered_max_after": b.get("uncovered_max"), "splats": b.get("splat_count"),
                     "ply_sha256_before": ha, "ply_sha256_after": hb, "equal": a["psnr"] == b["psnr"] and ha == hb})
    return rows


def step_rate_summary(lines: list[dict], before: str, after: str) -> dict:
    """{config: {before, after: {runs, median, min, max, steps_per_second}, after_over_before}}."""
    summary = {}
    for config, name in CONFIGS.items():
        entry = {}
        for side, tree in (("before", before), ("after", after)):
            values = [r["steps_per_second"] for r in lines if r["config"] == config and r["tree"] == tree]
            entry[side] = {"runs": len(values), "median": round(statistics.median(values), 3),
                           "min": round(min(values), 3), "max": round(max(values), 3),
                           "steps_per_second": [round(v, 3) for v in values]}
        entry["after_over_before"] = round(entry["after"]["median"] / entry["before"]["median"], 3)
        summary[name] = entry
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("behaviour")
    p.add_argument("out", type=Path, help="the folder holding before/ and after/")
    p.add_argument("before_commit")
    p.add_argument("after_commit")
    p.add_argument("--record", required=True)
    q = sub.add_parser("step_rate")
    q.add_argument("jsonl", type=Path)
    q.add_argument("before_tree")
    q.add_argument("after_tree")
    q.add_argument("--record", required=True)
    args = parser.parse_args(argv)
    if args.what == "behaviour":
        rows = behaviour_rows(args.out)
        record = {
            "what": "held-out figures from metrics.json (and metrics_splats.json) before and after issue 65's code moves "
                    "(layers that import one way, one pinhole camera, one splat geometry, --sampler, the page's "
                    "constants from Python), one thread per run; the check: every figure equal to the last digit, the "
                    "starting splats' PLY byte for byte",
            "machine": "2 CPU cores (Intel Xeon), no GPU, torch 2.14.1; the two trees ran side by side, one thread each "
                       "(OMP_NUM_THREADS=1 makes the figures independent of load)",
            "before_commit": args.before_commit, "after_commit": args.after_commit,
            "env": "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1",
            "script": "benchmarks/redesign_behaviour.sh TREE OUT/{before,after}, then python -m benchmarks.redesign_collect "
                      "behaviour OUT BEFORE AFTER --record R (the two splat rows: --bake_seconds 0, the starting splats "
                      "with no fit, then enerf eval --splats)",
            "rows": rows, "all_equal": all(r["equal"] for r in rows)}
    else:
        lines = [json.loads(line) for line in args.jsonl.read_text().splitlines() if line.strip()]
        record = {
            "what": "training steps per second before and after issue 65's code moves, side by side: each tree's "
                    "benchmarks.step_rate run in turn, 2 threads, nothing else running; demo_grid 150 steps after 30 "
                    "(9 runs each), fern_cpu and the zero-config fox 60 after 10 (3 runs each)",
            "command": "benchmarks/redesign_step_rate.sh BEFORE AFTER OUT.jsonl, then python -m benchmarks.redesign_collect "
                       "step_rate OUT.jsonl BEFORE AFTER --record R",
            "machine": "2 CPU cores (Intel Xeon), no GPU, torch 2.14.1; load average before each run 0.9-1.6 (the "
                       "benchmark's own)",
            "before_tree": args.before_tree, "after_tree": args.after_tree,
            "summary": step_rate_summary(lines, args.before_tree, args.after_tree)}
    Path(args.record).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k in ("all_equal", "summary")}, indent=1)[:2000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
