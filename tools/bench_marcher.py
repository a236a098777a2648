"""Occupancy-grid ray marching (torch_grid) against NeRF's hierarchical sampler, on the CPU demo.

Three measurements, printed as a table and written to ``<basedir>/bench_marcher.json``:

1. ``hierarchical`` trains with ``--config`` (``configs/demo.txt``) for ``--budget`` seconds
   of training time (``--time_budget``; held-out evaluation every ``--eval_every`` steps, not
   timed) and its final held-out PSNR becomes the target.
2. ``torch_grid`` trains with ``--grid_config`` (``configs/demo_grid.txt``: the same network,
   rays per step and learning rate, plus the grid's settings) until a periodic held-out
   evaluation (every ``--grid_eval_every`` steps) reaches that PSNR (``--stop_at_psnr``) or
   ``--cap`` seconds pass; reported: the training time when it got there, and the mean
   network queries per training ray of both runs up to that point (all points sent to the
   field while rendering training rays), and separately the points the grid updates sent to
   the field per training ray.
3. Conditioning overhead under torch_grid: a ``--conditioning row`` field and a ``none``
   field, same initial weights, each with its own optimizer, occupancy grid (copied from
   run 2's trained grid) and ray batch, take full training steps (grid update, march,
   render, backward, Adam) interleaved in one process (order flipped every repetition,
   after warm-up). Reported: the median of per-repetition time ratios row / none.

Wall-clock figures are only meaningful on an otherwise idle machine; in this project run it
as ``flock /tmp/enerf-cpu.lock python tools/bench_marcher.py``.

    python tools/bench_marcher.py                       # about 10 minutes on 2 CPU cores
    python tools/bench_marcher.py --reuse_hierarchical  # keep run 1 from --basedir, redo 2 and 3
    python tools/bench_marcher.py --budget 60 --cap 60 --overhead_reps 10   # a quick look
"""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import statistics
import time
from pathlib import Path

import torch

from enerf.checkpoint import atomic_write_text, load_checkpoint
from enerf.cli import build_train_parser, run_config_from_args
from enerf.config import RunConfig
from enerf.data.sampler import RaySampler, training_rays
from enerf.render.renderer import make_renderer
from enerf.train.components import build_fields, field_fns, load_scene
from enerf.train.nerf import train_nerf, training_step
from enerf.train.ray_batch import RayBatch
from enerf.train.state import optimizer_from_config

DATA_ROOT = Path("data")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/demo.txt", help="hierarchical run")
    parser.add_argument("--grid_config", default="configs/demo_grid.txt", help="torch_grid run (same network)")
    parser.add_argument("--budget", type=float, default=300.0, help="hierarchical training seconds")
    parser.add_argument("--eval_every", type=int, default=250, help="hierarchical: steps between evaluations")
    parser.add_argument("--grid_eval_every", type=int, default=100, help="torch_grid: steps between evaluations")
    parser.add_argument("--cap", type=float, default=300.0, help="torch_grid: give up after this many seconds")
    parser.add_argument("--grid_flags", default="", help="extra enerf train flags for the torch_grid run")
    parser.add_argument("--overhead_reps", type=int, default=30, help="timed steps per field in measurement 3")
    parser.add_argument("--overhead_warmup", type=int, default=5)
    parser.add_argument("--basedir", default="runs/bench_marcher")
    parser.add_argument("--skip_training", action="store_true", help="reuse runs 1 and 2 from --basedir")
    parser.add_argument("--reuse_hierarchical", action="store_true", help="reuse run 1 from --basedir")
    return parser.parse_args()


def make_config(args: argparse.Namespace, config: str, *flags: str) -> RunConfig:
    argv = ["--config", config, "--basedir", args.basedir, "--no_lpips", "--quiet", "--kappa_every", "0", *flags]
    return run_config_from_args(build_train_parser().parse_args(argv))


def earlier_run(args: argparse.Namespace, name: str) -> dict:
    """metrics.json of an earlier run in --basedir (for --reuse_hierarchical / --skip_training)."""
    path = Path(args.basedir) / name / "metrics.json"
    if not path.is_file():
        raise SystemExit(f"bench_marcher: {path} does not exist; run once without --reuse_hierarchical / "
                         "--skip_training, or point --basedir at a folder that holds that run")
    return json.loads(path.read_text())


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


def train_run(cfg: RunConfig) -> dict:
    metrics = train_nerf(cfg, data_root=DATA_ROOT, progress=False)
    return metrics


def overhead(args: argparse.Namespace, grid_cfg: RunConfig, grid_state: dict) -> dict:
    """Measurement 3: per-step time of row vs none conditioning under torch_grid, interleaved."""
    device = torch.device("cpu")
    scene = load_scene(grid_cfg.data, DATA_ROOT)
    rays, rgb = training_rays(scene, scene.i_train, device)
    sessions = {}
    torch.manual_seed(0)
    base = build_fields(grid_cfg.field, with_fine=False, device=device)
    for mode in ("none", "row"):
        cfg = copy.deepcopy(grid_cfg)
        cfg = RunConfig(**{**cfg.__dict__, "field": type(cfg.field)(**{**cfg.field.__dict__, "conditioning": mode})})
        fields = build_fields(cfg.field, with_fine=False, device=device)
        fields["coarse"].load_state_dict(base["coarse"].state_dict())
        generator = torch.Generator().manual_seed(1)
        renderer = make_renderer(cfg.render, device, state=grid_state)
        sessions[mode] = {
            "fields": fields,
            "fns": field_fns(fields, cfg.render.raw_noise_std),  # as the trainer
            "optimizer": optimizer_from_config(fields.values(), cfg.train),  # as the trainer
            "renderer": renderer,
            "sampler": RaySampler(rays, rgb, cfg.train.n_rand, generator),
            "generator": generator,
            "batch": RayBatch.for_run(cfg, rays.origins.shape[0], renderer.name),
            "times": [],
            "samples": [],
            "step": grid_cfg.render.grid_warmup,  # past warm-up: updates touch half the cells, as in training
        }

    def step(s: dict) -> float:
        before = s["batch"].samples
        tic = time.perf_counter()
        training_step(s["step"], s["fields"], s["fns"], s["renderer"], s["sampler"], s["batch"], s["optimizer"],
                      s["generator"])
        s["step"] += 1
        s["samples"].append(s["batch"].samples - before)
        return time.perf_counter() - tic

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
        "reps": args.overhead_reps,
    }


def main() -> None:
    args = parse_args()
    torch.set_num_threads(torch.get_num_threads())
    hier_cfg = make_config(args, args.config, "--expname", "hierarchical", "--renderer", "hierarchical",
                           "--time_budget", str(args.budget), "--eval_every", str(args.eval_every), "--iters", "100000")
    grid_flags = shlex.split(args.grid_flags)
    if args.skip_training or args.reuse_hierarchical:
        hier = earlier_run(args, "hierarchical")
    else:
        print(f"[1/3] hierarchical, {args.budget:.0f} s of training ...", flush=True)
        hier = train_run(hier_cfg)
    target = hier["psnr"]
    grid_cfg = make_config(args, args.grid_config, "--expname", "torch_grid", "--renderer", "torch_grid", "--time_budget", str(args.cap),
                           "--eval_every", str(args.grid_eval_every), "--iters", "100000",
                           "--stop_at_psnr", f"{target:.6f}", *grid_flags)
    check_same_model(hier_cfg, grid_cfg)
    if args.skip_training:
        grid = earlier_run(args, "torch_grid")
    else:
        print(f"[2/3] torch_grid until {target:.2f} dB (cap {args.cap:.0f} s) ...", flush=True)
        grid = train_run(grid_cfg)
    hit = reached(grid["history"], target)
    payload, _ = load_checkpoint(Path(args.basedir) / "torch_grid" / "checkpoints" / "latest.pt")
    print("[3/3] conditioning overhead under torch_grid ...", flush=True)
    over = overhead(args, grid_cfg, payload["extra"]["estimator"])

    result = {
        "hierarchical": {"psnr": hier["psnr"], "train_seconds": hier["train_seconds"], "steps": hier["steps"],
                         "queries_per_ray": hier.get("queries_per_ray")},
        "torch_grid": {
            "target_psnr": target,
            "reached": hit is not None,
            "seconds_to_target": hit["train_seconds"] if hit else None,
            "steps_to_target": hit["step"] if hit else None,
            "queries_per_ray_to_target": hit.get("queries_per_ray") if hit else None,
            "grid_update_queries_per_ray_to_target": hit.get("grid_update_queries_per_ray") if hit else None,
            "grid_occupied_at_target": hit.get("grid_occupied") if hit else None,
            "final_psnr": grid["psnr"],
            "final_train_seconds": grid["train_seconds"],
            "queries_per_ray": grid.get("queries_per_ray"),
            "samples_per_ray": grid.get("samples_per_ray"),
            "rays_per_step": grid.get("rays_per_step"),
            "steps": grid["steps"],
        },
        "overhead": over,
        "grid_config": args.grid_config,
        "grid_flags": args.grid_flags,
        "threads": torch.get_num_threads(),
    }
    atomic_write_text(Path(args.basedir) / "bench_marcher.json", json.dumps(result, indent=2) + "\n")

    h, g = result["hierarchical"], result["torch_grid"]
    print(f"hierarchical : {h['psnr']:.2f} dB after {h['train_seconds']:.0f} s ({h['steps']} steps), "
          f"{h['queries_per_ray']:.1f} queries / ray")
    if hit:
        print(f"torch_grid   : reached {target:.2f} dB after {g['seconds_to_target']:.0f} s ({g['steps_to_target']} steps) "
              f"= {g['seconds_to_target'] / h['train_seconds']:.2f}x the time; "
              f"{g['queries_per_ray_to_target']:.1f} queries / ray = {h['queries_per_ray'] / g['queries_per_ray_to_target']:.2f}x fewer "
              f"(grid updates: {g['grid_update_queries_per_ray_to_target']:.1f} more / ray; "
              f"{g['grid_occupied_at_target']:.0%} of the grid occupied; rays / step {g['rays_per_step']:.0f})")
    else:
        print(f"torch_grid   : did NOT reach {target:.2f} dB within {args.cap:.0f} s (final {g['final_psnr']:.2f} dB, "
              f"{g['queries_per_ray']:.1f} queries / ray)")
    print(f"conditioning : row / none step time under torch_grid = {over['ratio_row_over_none']:.3f} "
          f"(median of {over['reps']}; {over['step_seconds_none'] * 1e3:.0f} ms vs {over['step_seconds_row'] * 1e3:.0f} ms; "
          f"samples / step {over['samples_per_step_none']:.0f} vs {over['samples_per_step_row']:.0f})")


if __name__ == "__main__":
    main()
