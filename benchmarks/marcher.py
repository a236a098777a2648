"""Occupancy-grid ray marching (torch_grid) against NeRF's hierarchical sampler, on the CPU demo.

Two measurements, printed and written to ``<basedir>/bench_marcher.json``:

1. A race, in one process: ``hierarchical`` (``--config``, ``configs/demo.txt``) and
   ``torch_grid`` (``--grid_config``, ``configs/demo_grid.txt``: the same network, rays per
   step, learning rate and noise, plus the grid's settings) take training steps in turn, one
   step each, each with its own clock (only its own steps are timed; held-out evaluations
   every ``--eval_every`` / ``--grid_eval_every`` steps are not). Alternating steps makes
   both runs see the same machine: this CPU's speed drifts by tens of per cent within
   minutes, and runs timed one after the other compared a fast stretch with a slow one.
   ``hierarchical`` stops after ``--budget`` seconds of its own training time, and its
   held-out PSNR then is the target; ``torch_grid`` goes on until an evaluation reaches it
   or ``--cap`` seconds of its own time pass. Reported: the grid's training time to the
   target, the mean network queries per training ray of both runs to that point (all points
   sent to the field while rendering training rays), and separately the points the grid
   updates sent to the field per training ray. ``--probe NAME=FLAGS`` adds more torch_grid
   runs to the same race (``--grid_flags`` plus FLAGS), each on its own clock: a way to compare
   settings on one machine state. With more models in turn each step finds colder caches
   (the hierarchical run, the target's maker, slows most), so compare probes with the
   ``torch_grid`` run of the same race, not with the figures of a two-run race.
2. Conditioning overhead under torch_grid: a ``--conditioning row`` field and a ``none``
   field holding its folded weights (E W: both compute the same function at the start, so
   they march and query the same samples), each with its own optimizer, occupancy grid
   (copied from the race's trained grid) and ray batch, take full training steps (grid
   update, march, render, backward, Adam) interleaved in one process (order flipped every
   repetition, after warm-up). Reported: the median of per-repetition time ratios row / none.

Wall-clock figures are only meaningful with nothing else running; in this project run it as
``flock /tmp/enerf-cpu.lock python -m benchmarks.marcher``.

    python -m benchmarks.marcher                       # about 12 minutes on 2 CPU cores
    python -m benchmarks.marcher --seed 1              # both runs with another seed
    python -m benchmarks.marcher --budget 60 --cap 60 --overhead_reps 10   # a quick look
    python -m benchmarks.marcher --probe b2048="--target_sample_batch_size 2048"   # one more grid run

The README's record, three seeds, then their summary (``--collect`` reads each folder's bench_marcher.json):

    for s in 0 1 2; do python -m benchmarks.marcher --seed $s --basedir runs/bench_marcher_seed$s; done
    python -m benchmarks.marcher --collect runs/bench_marcher_seed0 runs/bench_marcher_seed1 runs/bench_marcher_seed2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import statistics
import time
from pathlib import Path

import torch

from enerf.cli import build_train_parser, run_config_from_args
from enerf.config import DATA_ROOT, RunConfig
from enerf.nn.conditioning import fold_module
from enerf.train.evaluate import evaluate_views, summarize
from enerf.train.nerf import NerfRun, sampler_record, prepare_run

from benchmarks.harness import ROOT, TRAINING_CODE, git_commit, keep_previous, load_average, machine, write_record

RECORD = ROOT / "benchmarks" / "marcher_race.json"
# what the record's figures depend on (benchmarks/pages: a later commit to these makes it stale)
DEPENDS = TRAINING_CODE + ["configs/demo.txt", "configs/demo_grid.txt"]
WHAT = ("configs/demo.txt (hierarchical, 32 samples per ray) raced against configs/demo_grid.txt (torch_grid) in one "
        "process, training steps in turn, each on its own clock; the hierarchical run's held-out PSNR after 300 s of "
        "training is the target the grid run must reach (evaluated every 100 steps); then row vs none under "
        "torch_grid, 60 interleaved training steps each on the race's trained grid")
COMMAND = ("python -m benchmarks.marcher --seed S --basedir runs/bench_marcher_seedS   (S = 0, 1, 2; writes "
           "bench_marcher.json), then python -m benchmarks.marcher --collect runs/bench_marcher_seed0 "
           "runs/bench_marcher_seed1 runs/bench_marcher_seed2")



def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/demo.txt", help="hierarchical run")
    parser.add_argument("--grid_config", default="configs/demo_grid.txt", help="torch_grid run (same network)")
    parser.add_argument("--budget", type=float, default=300.0, help="hierarchical: seconds of its own training time")
    parser.add_argument("--eval_every", type=int, default=250, help="hierarchical: steps between evaluations")
    parser.add_argument("--grid_eval_every", type=int, default=100, help="torch_grid: steps between evaluations")
    parser.add_argument("--cap", type=float, default=300.0, help="torch_grid: give up after this many seconds of its own training time")
    parser.add_argument("--grid_flags", default="", help="extra enerf train flags for the torch_grid run")
    parser.add_argument("--probe", action="append", default=[], metavar="NAME=FLAGS",
                        help="another torch_grid run in the race, with FLAGS added to --grid_flags (repeatable; "
                             "more runs share the machine's caches, so compare probes within one race)")
    parser.add_argument("--overhead_reps", type=int, default=60, help="timed steps per field in measurement 2")
    parser.add_argument("--overhead_warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="seed of both runs")
    parser.add_argument("--basedir", default="runs/bench_marcher", help="where bench_marcher.json goes")
    parser.add_argument("--collect", nargs="+", default=[], metavar="DIR",
                        help="run nothing: write --record from these folders' bench_marcher.json (one seed each)")
    parser.add_argument("--record", default=str(RECORD), help="--collect: the record to write")
    return parser.parse_args()


def make_config(args: argparse.Namespace, config: str, *flags: str) -> RunConfig:
    argv = ["--config", config, "--basedir", args.basedir, "--no_lpips", "--quiet", "--kappa_every", "0", *flags]
    return run_config_from_args(build_train_parser().parse_args(argv))


def check_same_model(hier: RunConfig, grid: RunConfig) -> None:
    """The comparison is fair only for the same network, data, rays per step and learning rate."""
    same = {"field": (hier.field, grid.field), "data": (hier.data, grid.data), "N_rand": (hier.train.n_rand, grid.train.n_rand),
            "lrate": (hier.train.lrate, grid.train.lrate), "lrate_decay": (hier.train.lrate_decay, grid.train.lrate_decay),
            "raw_noise_std": (hier.render.raw_noise_std, grid.render.raw_noise_std)}
    differ = [name for name, (a, b) in same.items() if a != b]
    if differ:
        raise SystemExit(f"bench_marcher: --config and --grid_config differ in {', '.join(differ)}; "
                         "they must train the same network the same way")


def reached(history: list[dict], target: float) -> dict | None:
    """The first evaluation at or above ``target`` dB."""
    return next((h for h in history if h["psnr"] >= target - 1e-9), None)


def evaluate(run: NerfRun, step: int, seconds: float) -> dict:
    """Held-out PSNR of ``run`` now, with its queries per ray so far (and its grid's record)."""
    per_image = evaluate_views(run.scene, run.eval_views, run.fields, run.cfg.render, run.device, renderer=run.renderer)
    return {"step": step, "train_seconds": seconds, "psnr": summarize(per_image, None)["psnr"],
            "queries_per_ray": run.rays_per_step.queries_per_ray, **sampler_record(run.renderer, run.rays_per_step)}


def race(hier_cfg: RunConfig, grid_cfgs: dict[str, RunConfig], budget: float, cap: float) -> dict:
    """Measurement 1: all runs step in turn, each timed on its own clock (see the module doc).
    ``grid_cfgs``: name -> torch_grid config ("torch_grid" and any probes)."""
    cfgs = {"hierarchical": hier_cfg, **grid_cfgs}
    runs = {name: prepare_run(cfg, DATA_ROOT) for name, cfg in cfgs.items()}
    every = {name: cfg.train.eval_every for name, cfg in cfgs.items()}
    limit = {name: budget if name == "hierarchical" else cap for name in runs}
    clock = {name: 0.0 for name in runs}
    steps = {name: 0 for name in runs}
    history: dict[str, list[dict]] = {name: [] for name in runs}
    target = None
    running = list(runs)
    while running:
        for name in list(running):
            run = runs[name]
            tic = time.perf_counter()
            run.step(steps[name])
            clock[name] += time.perf_counter() - tic
            steps[name] += 1
            out_of_time = clock[name] >= limit[name]
            if steps[name] % every[name] == 0 or out_of_time:
                history[name].append(evaluate(run, steps[name], clock[name]))
                print(f"  {name:12s} step {steps[name]:5d}, {clock[name]:5.0f} s: {history[name][-1]['psnr']:.2f} dB", flush=True)
            if name == "hierarchical" and out_of_time:
                target = history[name][-1]["psnr"]
                print(f"  target: {target:.2f} dB", flush=True)
            if out_of_time or (name != "hierarchical" and target is not None and reached(history[name], target)):
                running.remove(name)
    return {"runs": runs, "history": history, "steps": steps, "clock": clock, "target": target}


def grid_result(history: list[dict], target: float, hier_seconds: float, hier_queries: float) -> dict:
    """A grid run's figures at the first evaluation that reached ``target``."""
    hit = reached(history, target)
    if hit is None:
        return {"reached": False, "seconds_to_target": None, "steps_to_target": None, "time_ratio": None,
                "queries_per_ray_to_target": None, "fewer_queries": None,
                "grid_update_queries_per_ray_to_target": None, "grid_occupied_at_target": None}
    return {"reached": True, "seconds_to_target": hit["train_seconds"], "steps_to_target": hit["step"],
            "time_ratio": hit["train_seconds"] / hier_seconds,
            "queries_per_ray_to_target": hit["queries_per_ray"],
            "fewer_queries": hier_queries / hit["queries_per_ray"],
            "grid_update_queries_per_ray_to_target": hit.get("grid_update_queries_per_ray"),
            "grid_occupied_at_target": hit.get("grid_occupied")}


def overhead(args: argparse.Namespace, grid_cfg: RunConfig, grid_state: dict) -> dict:
    """Measurement 2: per-step time of row vs none conditioning under torch_grid, interleaved."""
    sessions = {}
    for mode in ("row", "none"):
        cfg = RunConfig(**{**grid_cfg.__dict__, "field": dataclasses.replace(grid_cfg.field, conditioning=mode)})
        run = prepare_run(cfg, DATA_ROOT)  # as the trainer: fields, optimizer, sampler, renderer, ray batch
        run.renderer.load_state_dict(grid_state)  # the race's trained grid
        if mode == "none":  # the row field's weights, folded: both compute the same function at the
            # start, so both march and query the same samples
            run.fields["coarse"].load_state_dict(fold_module(sessions["row"]["run"].fields["coarse"]).state_dict())
        # from past warm-up: grid updates touch half the cells, as in training
        sessions[mode] = {"run": run, "step": grid_cfg.render.grid_warmup, "times": [], "samples": [], "queries": []}

    def step(s: dict) -> float:
        batch = s["run"].rays_per_step
        before, queried = batch.samples, batch.queries
        tic = time.perf_counter()
        s["run"].step(s["step"])
        seconds = time.perf_counter() - tic
        s["step"] += 1
        s["samples"].append(batch.samples - before)
        s["queries"].append(batch.queries - queried)
        return seconds

    ratios = []
    for rep in range(args.overhead_warmup + args.overhead_reps):
        order = ("none", "row") if rep % 2 == 0 else ("row", "none")
        t = {mode: step(sessions[mode]) for mode in order}
        if rep >= args.overhead_warmup:
            sessions["none"]["times"].append(t["none"])
            sessions["row"]["times"].append(t["row"])
            ratios.append(t["row"] / t["none"])
    return {
        "step_seconds_none": statistics.median(sessions["none"]["times"]),
        "step_seconds_row": statistics.median(sessions["row"]["times"]),
        "ratio_row_over_none": statistics.median(ratios),
        "samples_per_step_none": statistics.mean(sessions["none"]["samples"][args.overhead_warmup:]),
        "samples_per_step_row": statistics.mean(sessions["row"]["samples"][args.overhead_warmup:]),
        "queries_per_step_none": statistics.mean(sessions["none"]["queries"][args.overhead_warmup:]),
        "queries_per_step_row": statistics.mean(sessions["row"]["queries"][args.overhead_warmup:]),
        "reps": args.overhead_reps,
    }


def parse_probes(specs: list[str]) -> dict[str, str]:
    """``--probe NAME=FLAGS`` values -> {name: flags}."""
    probes = {}
    for spec in specs:
        name, sep, flags = spec.partition("=")
        if not sep or not name or name in ("hierarchical", "torch_grid") or name in probes:
            raise SystemExit(f"bench_marcher: --probe {spec!r} is not NAME=FLAGS with a new name; "
                             "e.g. --probe b2048='--target_sample_batch_size 2048'")
        probes[name] = flags
    return probes


def _round(x: float | None, digits: int | None = 2) -> float | int | None:
    return None if x is None else round(x, digits)


def seed_entry(bench: dict) -> dict:
    """One seed of the record, rounded as the pages print it, from that seed's bench_marcher.json."""
    hier, grid, over = bench["hierarchical"], bench["torch_grid"], bench["overhead"]
    return {
        "load_before": bench.get("load_before"),
        "hierarchical": {"psnr": _round(hier["psnr"]), "train_seconds": _round(hier["train_seconds"], None),
                         "steps": hier["steps"], "queries_per_ray": _round(hier["queries_per_ray"])},
        "torch_grid": {
            "target_psnr": _round(grid["target_psnr"]), "reached": grid["reached"],
            "seconds_to_target": _round(grid["seconds_to_target"], None), "steps_to_target": grid["steps_to_target"],
            "time_ratio": _round(grid["time_ratio"]), "queries_per_ray_to_target": _round(grid["queries_per_ray_to_target"]),
            "fewer_queries": _round(grid["fewer_queries"]),
            "grid_update_queries_per_ray_to_target": _round(grid["grid_update_queries_per_ray_to_target"]),
            "grid_occupied_at_target": _round(grid["grid_occupied_at_target"]),
            "rays_per_step_mean": _round(grid["rays_per_step"], None), "final_psnr": _round(grid["final_psnr"]),
            "final_train_seconds": _round(grid["final_train_seconds"], None), "steps": grid["steps"],
            "queries_per_ray_final": _round(grid["queries_per_ray"]),
            "fewer_queries_final": _round(hier["queries_per_ray"] / grid["queries_per_ray"])},
        "overhead": {"ratio_row_over_none": _round(over["ratio_row_over_none"], 3),
                     "step_seconds_none": _round(over["step_seconds_none"], 4),
                     "step_seconds_row": _round(over["step_seconds_row"], 4), "reps": over["reps"]},
    }


def race_summary(seeds: dict[str, dict]) -> dict:
    """What the README's rows print, over the seeds (entries of ``seed_entry``): on how many the grid
    reached the target and in what share of the time, how far short it ended elsewhere (dB), its fewer
    queries per ray over the whole run, and row's step time over vanilla's."""
    grids = [(s["hierarchical"], s["torch_grid"]) for s in seeds.values()]
    ratios = [g["time_ratio"] for _, g in grids if g["reached"]]
    short = [h["psnr"] - g["final_psnr"] for h, g in grids if not g["reached"]]
    fewer = [round(h["queries_per_ray"] / g["queries_per_ray_final"], 2) for h, g in grids]
    rows = [s["overhead"]["ratio_row_over_none"] for s in seeds.values()]
    return {"speed": {"reached": len(ratios), "time_ratio_min": min(ratios, default=None),
                      "time_ratio_max": max(ratios, default=None), "short_db_max": max(short, default=None),
                      "fewer_queries_min": min(fewer), "fewer_queries_max": max(fewer)},
            "overhead": {"ratio_row_over_none_min": min(rows), "ratio_row_over_none_max": max(rows)}}


def collect(folders: list[str], record_path: Path | str = RECORD) -> dict:
    """The record of one bench_marcher.json per seed (``folders``); an older record at ``record_path``
    made at another commit moves under ``previous`` (its own ``previous`` dropped)."""
    benches = []
    for folder in folders:
        path = Path(folder) / "bench_marcher.json"
        if not path.is_file():
            raise SystemExit(f"bench_marcher: {path} not found; run python -m benchmarks.marcher --seed S "
                             f"--basedir {folder} first")
        try:
            bench = json.loads(path.read_text())
            seed_entry(bench), bench["seed"]
        except (ValueError, KeyError, TypeError) as e:
            what = f"has no {e}" if isinstance(e, KeyError) else f"is not a bench_marcher record ({e})"
            raise SystemExit(f"bench_marcher: {path} {what}; run python -m benchmarks.marcher --seed S "
                             f"--basedir {folder} again") from None
        benches.append(bench)
    seeds = [b["seed"] for b in benches]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"bench_marcher: --collect got seeds {seeds}; give one folder per seed")
    commits = {b.get("commit") for b in benches}
    if len(commits) != 1:
        raise SystemExit(f"bench_marcher: the folders were measured at different commits {sorted(map(str, commits))}")
    entries = {str(b["seed"]): seed_entry(b) for b in sorted(benches, key=lambda b: b["seed"])}
    record = {"commit": commits.pop(), "depends": DEPENDS, "what": WHAT, "command": COMMAND,
              "machine": benches[0].get("machine"), "summary": race_summary(entries), "seeds": entries}
    write_record(record_path, keep_previous(record, record_path))
    return record


def main() -> None:
    args = parse_args()
    if args.collect:
        record = collect(args.collect, args.record)
        print(json.dumps(record["summary"], indent=1))
        return
    load_before = " ".join(f"{x:.2f}" for x in load_average())
    probes = parse_probes(args.probe)
    seed = ["--seed", str(args.seed)]
    hier_cfg = make_config(args, args.config, "--expname", "hierarchical", "--renderer", "hierarchical",
                           "--eval_every", str(args.eval_every), *seed)
    grid_cfgs = {name: make_config(args, args.grid_config, "--expname", name, "--renderer", "torch_grid",
                                   "--eval_every", str(args.grid_eval_every), *seed, *shlex.split(args.grid_flags),
                                   *shlex.split(flags))
                 for name, flags in {"torch_grid": "", **probes}.items()}
    for grid_cfg in grid_cfgs.values():
        check_same_model(hier_cfg, grid_cfg)
    print(f"[1/2] race: hierarchical for {args.budget:.0f} s of its training time, {', '.join(grid_cfgs)} until its "
          f"PSNR (cap {args.cap:.0f} s), one step each in turn ...", flush=True)
    out = race(hier_cfg, grid_cfgs, args.budget, args.cap)
    target, hier_hist = out["target"], out["history"]["hierarchical"]
    hier_seconds, hier_queries = out["clock"]["hierarchical"], hier_hist[-1]["queries_per_ray"]
    grid_run = out["runs"]["torch_grid"]
    print("[2/2] conditioning overhead under torch_grid ...", flush=True)
    over = overhead(args, grid_cfgs["torch_grid"], grid_run.renderer.state_dict())

    def grid_entry(name: str) -> dict:
        history = out["history"][name]
        return {"target_psnr": target, **grid_result(history, target, hier_seconds, hier_queries),
                "final_psnr": history[-1]["psnr"], "final_train_seconds": history[-1]["train_seconds"],
                **out["runs"][name].rays_per_step.summary(),  # queries_per_ray, samples_per_ray, rays_per_step over the whole run
                "steps": out["steps"][name], "history": history}

    result = {
        "hierarchical": {"psnr": target, "train_seconds": hier_seconds, "steps": out["steps"]["hierarchical"],
                         "queries_per_ray": hier_queries, "history": hier_hist},
        "torch_grid": grid_entry("torch_grid"),
        "probes": {name: {"flags": flags, **grid_entry(name)} for name, flags in probes.items()},
        "overhead": over,
        "grid_config": args.grid_config,
        "grid_flags": args.grid_flags,
        "seed": args.seed,
        "threads": torch.get_num_threads(),
        "commit": git_commit(),
        "machine": machine(),
        "load_before": load_before,
    }
    Path(args.basedir).mkdir(parents=True, exist_ok=True)
    write_record(Path(args.basedir) / "bench_marcher.json", result)

    h = result["hierarchical"]
    print(f"hierarchical : {h['psnr']:.2f} dB after {h['train_seconds']:.0f} s ({h['steps']} steps), "
          f"{h['queries_per_ray']:.1f} queries / ray")
    for name, g in [("torch_grid", result["torch_grid"]), *result["probes"].items()]:
        if g["reached"]:
            print(f"{name:12s} : reached {target:.2f} dB after {g['seconds_to_target']:.0f} s ({g['steps_to_target']} steps) "
                  f"= {g['time_ratio']:.2f}x the time; {g['queries_per_ray_to_target']:.1f} queries / ray = "
                  f"{g['fewer_queries']:.2f}x fewer (grid updates: {g['grid_update_queries_per_ray_to_target']:.1f} more / ray; "
                  f"{g['grid_occupied_at_target']:.0%} of the grid occupied; rays / step {g['rays_per_step']:.0f})")
        else:
            print(f"{name:12s} : did NOT reach {target:.2f} dB within {args.cap:.0f} s (final {g['final_psnr']:.2f} dB, "
                  f"{g['queries_per_ray']:.1f} queries / ray)")
    print(f"conditioning : row / none step time under torch_grid = {over['ratio_row_over_none']:.3f} "
          f"(median of {over['reps']}; {over['step_seconds_none'] * 1e3:.0f} ms vs {over['step_seconds_row'] * 1e3:.0f} ms; "
          f"samples / step {over['samples_per_step_none']:.0f} vs {over['samples_per_step_row']:.0f}, "
          f"queries / step {over['queries_per_step_none']:.0f} vs {over['queries_per_step_row']:.0f})")


if __name__ == "__main__":
    main()
