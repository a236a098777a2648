"""Shape-network benchmarks: the 5-minute CPU targets, and vanilla vs row / col / rowcol.

``targets``: occupancy and SDF networks on the torus and the bunny (configs/shape_cpu.txt,
``--time_budget 300``), then the marching-cubes time of a 128^3 mesh (``enerf shape mesh``).
Targets: IoU >= 0.95 (occupancy), Chamfer-L1 <= 0.005 (SDF), mesh < 10 s. It reports the
final metrics and the first evaluation (``eval_every``) at which each target was met. Run
it under the CPU lock, as its times are the point:

    flock /tmp/enerf-cpu.lock python -m benchmarks.shapes targets

``compare``: shapes x conditioning modes x seeds of short fixed-length runs
(configs/shape_compare.txt, so the numbers do not depend on the machine's load), then a
Markdown table of mean ± std over seeds and the difference to ``none``. The grid is
``enerf compare --task shape``'s (``enerf.compare``: runs in
``<out>/runs/<shape>-<mode>-s<seed>/``, finished ones skipped, cut-off ones resumed):

    nice -n 19 python -m benchmarks.shapes compare --jobs 2 --record benchmarks/shapes_compare.json

Runs go through the CLI (``python -m enerf.cli shape train``) with ``OMP_NUM_THREADS`` set
to ``--threads`` (default 1: on an oversubscribed 2-core machine two torch threads per run
are several times slower than one). ``targets`` re-runs nothing whose metrics.json exists.
``compare --record FILE`` also writes the per-seed metrics and the table's deltas as a JSON record.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from enerf.errors import EnerfError

from benchmarks.grid import finished_metrics, grid_runs, run_grid_runs
from benchmarks.harness import command_line, git_commit, load_average, machine, write_record

# what compare's record depends on (benchmarks/pages: a later commit to these, or to its --config, makes it stale)
DEPENDS = ["enerf/nn", "enerf/shapes", "enerf/optim", "enerf/config", "enerf/compare", "enerf/mesh_distance.py"]


METRICS = (("iou", "IoU", ".4f"), ("chamfer_l1", "Chamfer-L1", ".5f"),
           ("normal_consistency", "NC", ".4f"), ("fscore", "F-score", ".4f"))


def _run(cmd: list[str], threads: int, log: Path) -> float:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    log.parent.mkdir(parents=True, exist_ok=True)
    tic = time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {rc}); see {log}")
    return time.perf_counter() - tic


def _train_cmd(config: str, mesh: str, kind: str, mode: str, seed: int, basedir: Path, expname: str,
               extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "enerf.cli", "shape", "train", "--config", config, "--mesh", mesh, "--kind", kind,
            "--conditioning", mode, "--seed", str(seed), "--basedir", str(basedir), "--expname", expname,
            "--quiet", *extra]


def targets(args) -> None:
    base = Path(args.out)
    rows = []
    for mesh in args.shapes:
        for kind in ("occupancy", "sdf"):
            name = f"{mesh}_{kind}_{args.conditioning}"
            metrics_path = base / name / "metrics.json"
            if not metrics_path.is_file():
                extra = ["--time_budget", str(args.budget)]
                if kind == "sdf":
                    extra += ["--eikonal_weight", str(args.eikonal)]
                _run(_train_cmd(args.config, mesh, kind, args.conditioning, 0, base, name, extra), args.threads,
                     base / f"{name}.log")
            m = json.loads(metrics_path.read_text())
            key, ok = ("iou", lambda v: v >= 0.95) if kind == "occupancy" else ("chamfer_l1", lambda v: v <= 0.005)
            first = next((h for h in m["history"] if h.get(key) is not None and ok(h[key])), None)
            ckpt = base / name / "checkpoints" / "latest.pt"
            out = subprocess.run([sys.executable, "-m", "enerf.cli", "shape", "mesh", "--ckpt", str(ckpt),
                                  "--resolution", "128", "--out", str(base / name / "bench_mesh_128.ply")],
                                 env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)),
                                 capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(out.stderr.strip())
            mesh_s = float(out.stdout.split(" s) ->")[0].rsplit(", ", 1)[-1])
            rows.append((mesh, kind, m, first, key, mesh_s))
    print(f"| shape | network | steps | train s | IoU | Chamfer-L1 | NC | F-score | target first met | mesh 128³ s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mesh, kind, m, first, key, mesh_s in rows:
        met = "not met" if first is None else f"{key} {first[key]:.4f} at {first['train_seconds']:.0f} s (step {first['step']})"
        cells = [f"{m[k]:{fmt}}" if m.get(k) is not None else "n/a" for k, _, fmt in METRICS]
        print(f"| {mesh} | {kind} | {m['steps']} | {m['train_seconds']:.0f} | {' | '.join(cells)} | {met} | {mesh_s:.1f} |")


def compare(args) -> None:
    """The grid through ``enerf compare --task shape`` (``enerf.compare``), then the table."""
    runs = grid_runs("shape", args.shapes, args.modes, args.seeds, Path(args.out), args.config, ["--kind", args.kind])
    load_before = load_average()
    if not args.report_only:
        try:  # one run per shape first, so that each shape's samples are cached before runs share them
            run_grid_runs("shape", runs, ["--kind", args.kind], args.jobs, args.threads, first_per_scene=True)
        except EnerfError as err:
            sys.exit(f"bench_shapes: {err}")

    def values(mesh, mode, key):
        return [float("nan") if m.get(key) is None else m[key] for m in finished_metrics(runs, mesh, mode)]

    def mean(v):
        return statistics.mean(v) if v else float("nan")

    print(f"{args.kind} networks, seeds {', '.join(map(str, args.seeds))}, config {args.config}; "
          f"mean ± std over the seeds that finished (n), Δ = mean - mean of none\n")
    head = " | ".join(label for _, label, _ in METRICS)
    rows = []
    print(f"| shape | mode | n | {head} | Δ IoU | Δ Chamfer-L1 |")
    print("|---|---|---|" + "---|" * (len(METRICS) + 2))
    for mesh in args.shapes:
        base_iou, base_cd = mean(values(mesh, "none", "iou")), mean(values(mesh, "none", "chamfer_l1"))
        for mode in args.modes:
            cells = []
            for key, _, fmt in METRICS:
                v = values(mesh, mode, key)
                sd = statistics.stdev(v) if len(v) > 1 and not any(map(math.isnan, v)) else float("nan")
                cells.append(f"{mean(v):{fmt}} ± {sd:{fmt}}")
            n = len(values(mesh, mode, "iou"))
            d_iou, d_cd = mean(values(mesh, mode, "iou")) - base_iou, mean(values(mesh, mode, "chamfer_l1")) - base_cd
            print(f"| {mesh} | {mode} | {n} | {' | '.join(cells)} | {d_iou:+.4f} | {d_cd:+.5f} |")
            rows.append({"shape": mesh, "mode": mode, "n": n, "iou_delta": d_iou, "chamfer_l1_delta": d_cd,
                         **{key: values(mesh, mode, key) for key, _, _ in METRICS}})
    if args.record:
        write_record(args.record, {
            "what": f"{args.kind} networks, {args.config}, shapes x conditioning modes x seeds {args.seeds}; "
                    "per-seed metrics of each run, delta = mean - mean of none",
            "command": command_line(), "machine": machine(), "commit": git_commit(), "depends": [*DEPENDS, args.config],
            "load_before": load_before, "load_after": load_average(), "rows": rows})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    t = sub.add_parser("targets", help="5-minute targets on torus and bunny")
    t.add_argument("--config", default="configs/shape_cpu.txt")
    t.add_argument("--shapes", nargs="+", default=["torus", "bunny"])
    t.add_argument("--conditioning", default="none")
    t.add_argument("--budget", type=float, default=300.0, help="training seconds per run")
    t.add_argument("--eikonal", type=float, default=0.0, help="eikonal weight of the SDF runs")
    t.add_argument("--out", default="runs/bench_shapes/targets")
    c = sub.add_parser("compare", help="conditioning modes x shapes x seeds, fixed step counts")
    c.add_argument("--config", default="configs/shape_compare.txt")
    c.add_argument("--shapes", nargs="+", default=["torus", "bunny", "box"])
    c.add_argument("--modes", nargs="+", default=["none", "row", "col", "rowcol"])
    c.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    c.add_argument("--kind", default="occupancy", choices=("occupancy", "sdf"))
    c.add_argument("--jobs", type=int, default=1, help="runs at once")
    c.add_argument("--out", default="runs/bench_shapes/compare")
    c.add_argument("--report_only", action="store_true", help="tabulate the finished runs, start none")
    c.add_argument("--record", help="also write the per-seed metrics and the table's deltas to this JSON file")
    for p in (t, c):
        p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of each run")
    args = parser.parse_args()
    targets(args) if args.what == "targets" else compare(args)


if __name__ == "__main__":
    main()
