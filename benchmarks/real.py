"""Real-scene benchmark: held-out PSNR against training time for the CPU configs.

Trains ``--config`` on ``--scene`` for ``--minutes`` of training time (held-out evaluations
every ``--eval_every`` steps are not counted), then prints and writes
``<out>/<scene>-s<seed>/bench_real.json`` and a markdown table: PSNR at each evaluation, the
PSNR reached at 1 / 2 / 5 / 10 minutes (last evaluation at or before), the first time the
target was reached (scenes with a target), steps and steps per second, and the wall time of the
whole ``enerf train`` (loading, evaluations and checkpoints included) with the run's own split of it
(``wall_parts``: metrics.json's ``wall_seconds``, seconds of loading, of the training loop with its
periodic evaluations and checkpoints, of the final evaluation, and their total). The periodic evaluations
score the config's ``eval_views`` held-out views; the last one scores all of them.

A peer's curve can be put beside it (``--peer_log``: JSON lines ``{"step", "train_seconds",
"psnr"}`` prefixed by ``[PEER]``, as printed by the instrumented nerf-pytorch run described in
benchmarks/README.md); the table then shows both at the same time points.

Figures are only meaningful with nothing else running on the machine.

    python -m benchmarks.real --scene fern                     # configs/fern_cpu.txt, 10 min
    python -m benchmarks.real --scene lego                     # configs/lego_cpu.txt, 10 min
    python -m benchmarks.real --scene fern --minutes 2 --seed 1
    python -m benchmarks.real --scene lego --datadir ../shared/data/nerf_synthetic/lego --record benchmarks/lego_cpu.json

``--record FILE`` also writes the run into a JSON record, with the commit, the code it depends on and the machine.
A one-run record (benchmarks/lego_cpu.json) takes it as its ``rerun`` (the one it replaces goes to the end of
``previous_reruns``) with a ``summary`` of the held-out PSNR and SSIM. A per-seed record (benchmarks/fern_cpu.json:
``runs`` a list with a ``seed``, ``psnr``, ``steps`` and ``train_seconds`` each) takes it in place of the run of the same seed (that one goes to the end of
``replaced_runs``; a new seed is added) and recomputes its summary's ``psnr_mean``, ``psnr_std`` (sample standard
deviation) and ``steps_per_second`` over its runs:

    python -m benchmarks.real --scene fern --seed 1 --datadir ../shared/data/nerf_llff_data/fern --record benchmarks/fern_cpu.json

``--reuse --record FILE --commit C`` records a run trained earlier at commit C.
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

from benchmarks.harness import (TRAINING_CODE, git_commit, load_average, machine, oldest_commit, write_record,
                                write_report_files)


TARGETS = {"fern": 24.0, "lego": 28.0}  # issue targets (dB) within 10 minutes of training
MARKS = (60.0, 120.0, 300.0, 600.0)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scene", default="fern", help="scene name (data/nerf_llff_data/<name> or data/nerf_synthetic/<name>)")
    parser.add_argument("--config", default=None, help="config file (default configs/<scene>_cpu.txt)")
    parser.add_argument("--datadir", default=None, help="scene folder, instead of the name under data/")
    parser.add_argument("--minutes", type=float, default=10.0, help="training time budget")
    parser.add_argument("--eval_every", type=int, default=None, help="steps between held-out evaluations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=None, help="PSNR to reach (default: the issue's target)")
    parser.add_argument("--out", default="runs/bench_real")
    parser.add_argument("--peer_log", default=None, help="log with [PEER] JSON lines of a peer run")
    parser.add_argument("--peer_name", default="nerf-pytorch")
    parser.add_argument("--reuse", action="store_true", help="report an existing run instead of training again")
    parser.add_argument("--record", default="", help="also write the run as this JSON record's `rerun`")
    parser.add_argument("--commit", default="", help="--reuse --record: the commit the run was trained at "
                        "(default: the checkout's)")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="-- flags passed to enerf train")
    return parser.parse_args()


def psnr_at(history: list[dict], seconds: float) -> float | None:
    """PSNR of the last evaluation at or before ``seconds`` of training (None before the first).

    A time-budgeted run stops at the first step past its budget, so its final evaluation lies a
    fraction of a step beyond the mark: 1 % of slack counts it at the mark."""
    done = [h for h in history if h["train_seconds"] <= seconds * 1.01]
    return done[-1]["psnr"] if done else None


def time_to(history: list[dict], target: float) -> float | None:
    """Training seconds of the first evaluation at or above ``target`` (None if never)."""
    return next((h["train_seconds"] for h in history if h["psnr"] >= target), None)


def read_peer(path: Path) -> list[dict]:
    rows = []
    for line in Path(path).read_text().splitlines():
        if "[PEER]" in line:  # a progress bar on the same stream may precede it on its line
            rows.append(json.loads(line[line.index("[PEER]") + len("[PEER]"):]))
    return rows


def _fmt(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def report(name: str, metrics: dict, target: float | None, peer: list[dict] | None, peer_name: str,
           eval_views: str, wall_seconds: float | None) -> str:
    history = metrics["history"]
    curves = {"enerf": history, **({peer_name: peer} if peer else {})}
    wall = "" if wall_seconds is None else f"; {wall_seconds / 60:.1f} min of wall time in all"
    parts = metrics.get("wall_seconds")
    if parts:
        wall += (f" (loading {parts['load'] / 60:.1f} min, training loop {parts['train'] / 60:.1f} min, final "
                 f"evaluation {parts['eval'] / 60:.1f} min)")
    lines = [f"# {name}", "", f"held-out PSNR {metrics['psnr']:.2f} dB, SSIM {metrics['ssim']:.4f} after "
             f"{metrics['steps']} steps / {metrics['train_seconds']:.0f} s of training "
             f"({metrics['steps'] / max(metrics['train_seconds'], 1e-9):.2f} steps/s){wall}", "",
             f"Evaluations: {eval_views}.", "",
             "| run | " + " | ".join(f"{m / 60:g} min" for m in MARKS) + (f" | time to {target:g} dB |" if target else " |"),
             "|---" * (len(MARKS) + 1 + bool(target)) + "|"]
    for run, hist in curves.items():
        cells = [_fmt(psnr_at(hist, m), ".2f") for m in MARKS]
        reach = time_to(hist, target) if target else None
        tail = f" | {_fmt(reach, '.0f')}{'' if reach is None else ' s'} |" if target else " |"
        lines.append(f"| {run} | " + " | ".join(cells) + tail)
    lines += ["", "| step | train s | PSNR |", "|---|---|---|"]
    lines += [f"| {h['step']} | {h['train_seconds']:.0f} | {h['psnr']:.2f} |" for h in history]
    return "\n".join(lines) + "\n"


def main() -> int:
    args = parse_args()
    config = args.config or f"configs/{args.scene}_cpu.txt"
    name = f"{args.scene}-s{args.seed}"
    basedir = Path(args.out)
    config_run_folder = basedir / name
    commit = args.commit or git_commit()
    if args.record:  # checked before training: a record it cannot write is said at once, nothing run
        problem = record_problem(Path(args.record))
        if problem:
            print(f"bench_real: {problem}", file=sys.stderr)
            return 2
    if not args.reuse:
        cmd = [sys.executable, "-m", "enerf.cli", "train", "--config", config, "--seed", str(args.seed),
               "--basedir", str(basedir), "--expname", name, "--time_budget", str(args.minutes * 60),
               "--iters", "10000000", "--quiet"]
        cmd += ["--datadir", args.datadir] if args.datadir else ["--scene", args.scene]
        if args.eval_every:
            cmd += ["--eval_every", str(args.eval_every)]
        cmd += [a for a in args.extra if a != "--"]
        print("+ " + " ".join(cmd), flush=True)
        load_before = load_average()
        start = time.perf_counter()
        if subprocess.run(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode != 0:
            print(f"bench_real: training failed ({' '.join(cmd)})", file=sys.stderr)
            return 1
        wall_seconds = time.perf_counter() - start
        load = {"before": load_before, "after": load_average()}
        cmd = " ".join(["python", *cmd[1:]])  # the enerf train command it ran
    else:  # the run's own record, if an earlier bench_real wrote one
        old = config_run_folder / "bench_real.json"
        earlier = json.loads(old.read_text()) if old.is_file() else {}
        wall_seconds, load, cmd = earlier.get("wall_seconds"), earlier.get("load"), earlier.get("command")
    metrics = json.loads((config_run_folder / "metrics.json").read_text())
    target = args.target if args.target is not None else TARGETS.get(args.scene)
    peer = read_peer(Path(args.peer_log)) if args.peer_log else None
    n_periodic = json.loads((config_run_folder / "config.json").read_text())["train"]["eval_views"]
    n_all = len(metrics["per_image"])
    eval_views = (f"every evaluation on all {n_all} held-out views" if n_periodic <= 0 or n_periodic >= n_all else
                  ("periodic ones on the first held-out view" if n_periodic == 1 else
                   f"periodic ones on the first {n_periodic} held-out views") + f", the last on all {n_all}")
    text = report(f"{args.scene} ({config}, seed {args.seed})", metrics, target, peer, args.peer_name,
                  eval_views, wall_seconds)
    summary = {"scene": args.scene, "config": config, "seed": args.seed, "minutes": args.minutes,
               "psnr": metrics["psnr"], "ssim": metrics["ssim"], "steps": metrics["steps"],
               "train_seconds": metrics["train_seconds"], "wall_seconds": wall_seconds,
               "wall_parts": metrics.get("wall_seconds"), "eval_views": eval_views,
               "target": target, "time_to_target": time_to(metrics["history"], target) if target else None,
               "psnr_at": {f"{m:g}s": psnr_at(metrics["history"], m) for m in MARKS},
               "per_view_psnr": {str(p["view"]): p["psnr"] for p in metrics["per_image"]},
               "command": cmd, "load": load,  # 1 / 5 / 15-minute load averages before and after the run
               "history": metrics["history"], "peer": peer}
    write_report_files(config_run_folder, "bench_real", summary, text)
    if args.record:
        path = Path(args.record)
        record = json.loads(path.read_text()) if path.is_file() else {}
        write_record(path, with_seed_run(record, summary, commit, config) if is_per_seed(record) else
                     with_rerun(record, summary, commit, config, reproduce_command(sys.argv[1:])))
        print(f"wrote {path}")
    return 0


def record_problem(path: Path) -> str | None:
    """Why ``--record PATH`` cannot take a run (None when it can): unreadable JSON, or a record that is neither
    per-seed (``is_per_seed``) nor one run's (a ``summary`` of only ``psnr`` and ``ssim``)."""
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return f"{path} is not a readable JSON record ({err}); fix or remove it"
    if is_per_seed(record):
        return None
    other = sorted(set(record.get("summary", {})) - {"psnr", "ssim"}) if isinstance(record, dict) else ["?"]
    if other:
        return (f"{path} is neither a one-run record (its summary has {', '.join(other)}) nor a per-seed one; "
                "--record writes a record like benchmarks/lego_cpu.json (one run's psnr and ssim) or "
                "benchmarks/fern_cpu.json (runs: a list with a seed, psnr, steps and train_seconds each)")
    return None


def with_rerun(record: dict, summary: dict, commit: str | None, config: str, command: str) -> dict:
    """``record`` with ``summary`` (a bench_real.json) as its ``rerun``: the replaced rerun appended to
    ``previous_reruns``; ``commit``, ``depends`` (the training code and ``config``), ``machine``,
    ``command`` and ``summary`` (PSNR to 2 decimals, SSIM to 3) set anew; its other fields kept."""
    record = dict(record)
    if "rerun" in record:
        record["previous_reruns"] = [*record.get("previous_reruns", []), record["rerun"]]
    record.update({"commit": commit, "depends": [*TRAINING_CODE, config], "command": command, "machine": machine(),
                   "summary": {"psnr": round(summary["psnr"], 2), "ssim": round(summary["ssim"], 3)},
                   "rerun": {**summary, "load_before": (summary.get("load") or {}).get("before")}})
    return record


SEED_RUN_KEYS = ("seed", "psnr", "steps", "train_seconds")  # what a per-seed record's summary is recomputed from


def is_per_seed(record: object) -> bool:
    """Whether ``record`` keeps one run per seed: ``runs`` a non-empty list of runs, each with ``SEED_RUN_KEYS``."""
    runs = record.get("runs") if isinstance(record, dict) else None
    return isinstance(runs, list) and bool(runs) and all(
        isinstance(r, dict) and all(key in r for key in SEED_RUN_KEYS) for r in runs)


def with_seed_run(record: dict, summary: dict, commit: str | None, config: str) -> dict:
    """Per-seed ``record`` with ``summary`` (a bench_real.json) in place of the run of its seed (the replaced one
    appended to ``replaced_runs``; a new seed is added, the runs kept in seed order). Each run carries its commit
    and machine (runs written before carry the record's); the record's ``commit`` is the oldest of them,
    ``depends`` the training code and ``config``; its summary's ``psnr_mean``, ``psnr_std`` (sample standard
    deviation, 0 for one run) and ``steps_per_second`` (all steps over all training seconds) are recomputed
    from the runs, its other fields kept."""
    record = dict(record)
    earlier = {"commit": record.get("commit"), "machine": record.get("machine")}
    runs, replaced = [], list(record.get("replaced_runs", []))
    for run in record["runs"]:
        run = {**earlier, **run}
        (replaced if run["seed"] == summary["seed"] else runs).append(run)
    new = {**summary, "commit": commit, "machine": machine(), "load_before": (summary.get("load") or {}).get("before")}
    runs = sorted([*runs, new], key=lambda run: run["seed"])
    psnrs = [run["psnr"] for run in runs]
    record.update({
        "runs": runs, "commit": oldest_commit([run["commit"] for run in runs]), "depends": [*TRAINING_CODE, config],
        "summary": {**record.get("summary", {}), "psnr_mean": round(statistics.fmean(psnrs), 2),
                    "psnr_std": round(statistics.stdev(psnrs), 2) if len(psnrs) > 1 else 0.0,
                    "steps_per_second": round(sum(run["steps"] for run in runs) /
                                              sum(run["train_seconds"] for run in runs), 2)}})
    if replaced:
        record["replaced_runs"] = replaced
    return record


def reproduce_command(argv: list[str]) -> str:
    """The command that trains and records the run again: ARGV without ``--reuse`` and ``--commit C``."""
    out, skip = ["python", "-m", "benchmarks.real"], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--commit":
            skip = True
        elif arg != "--reuse" and not arg.startswith("--commit="):
            out.append(arg)
    return " ".join(out)


if __name__ == "__main__":
    sys.exit(main())
