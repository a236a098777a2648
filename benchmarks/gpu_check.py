"""Check the GPU path (nerfacc) and measure what it costs; writes ``gpu_check.json`` and ``gpu_check.md``.

On a machine with a CUDA GPU::

    python -m benchmarks.gpu_check --scene fern --minutes 10      # configs/fern.txt, 4 runs of 10 minutes each

On a CPU it runs everything that needs no CUDA (torch_grid in nerfacc's place), leaves the
nerfacc figures null with the reason, lists what needed CUDA, and exits 0::

    python -m benchmarks.gpu_check --scene demo --minutes 0.2

Three parts, each reported as it runs:

1. ``nerfacc``: whether nerfacc's CUDA extension builds and loads here, the seconds that took
   (its first build JIT-compiles for minutes), or why it does not.
2. ``equality`` (``benchmarks.gpu_equality``): nerfacc and torch_grid render the same rays through the same
   occupancy grid. The fixture (``equality_case``): an analytic field whose density is a smooth function of
   position inside the cells where ``occupancy_pattern`` at the cell centre exceeds a level,
   and zero elsewhere; a 32^3 grid over [-1, 1]^3 read off it by ``build_renderer(..., read_off=...)``; three
   levels (sparse, half, dense: about 20, 50 and 80 % of the cells occupied), early stop on
   (transmittance 1e-4) and off; 4,096 rays, some starting or ending inside the box. Per
   case: the grid's occupied fraction, and on CUDA the largest |difference| of rgb, acc and
   depth on the rays where the two algorithms promise the same samples (``ambiguous_rays``
   says where they do not), and the rays whose sample counts differ.
3. ``training``: the scene's hierarchical config and its occupancy-grid config, each with
   ``--conditioning none`` and ``row`` (4 runs, one after the other, same seed), trained for
   ``--minutes`` of their own training time each (held-out evaluation not counted): held-out
   PSNR then, training rays per second, median step time, peak GPU memory, and per renderer
   the row / none median step-time ratio (the design goal is <= 1.03). The grid runs use
   nerfacc on CUDA and torch_grid elsewhere. Scenes: ``configs/<scene>.txt`` is the
   hierarchical run; the grid run is ``configs/<scene>_grid.txt`` where it exists, else the
   same file with ``--N_importance 0`` (one network, as nerfacc's examples).

The training runs reuse the trainer's own setup and step (``enerf.train.nerf.prepare_run`` /
``NerfRun.step``), so they train exactly as ``enerf train`` does.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from enerf.atomic import atomic_write_text
from enerf.cli import build_train_parser, run_config_from_args
from enerf.config import RunConfig
from enerf.data.resolve import resolve_scene_dir
from enerf.errors import EnerfError
from enerf.render.nerfacc_backend import nerfacc_status
from enerf.train.evaluate import evaluate_views, summarize
from enerf.train.nerf import prepare_run

from benchmarks.gpu_equality import EQUALITY_RAYS, equality_section
from benchmarks.harness import ROOT

__all__ = ["scene_config", "run_configs", "main"]

CUDA = torch.device("cuda")
CPU = torch.device("cpu")

# ----------------------------------------------------------------------------- training runs

RENDERER_RUNS = ("grid", "hierarchical")
CONDITIONINGS = ("none", "row")


def scene_config(scene: str, config_dir: Path = ROOT / "configs") -> Path:
    """``configs/<scene>.txt``.

    Raises:
        EnerfError: there is none.
    """
    base = config_dir / f"{scene}.txt"
    if not base.is_file():
        raise EnerfError(f"--scene {scene}: configs/{scene}.txt not found; use a scene with a config file in "
                         f"{config_dir}/ (e.g. demo or fern)")
    return base


def run_configs(scene: str, grid_renderer: str, basedir: str, seed: int, device: str, flags: list[str],
                config_dir: Path = ROOT / "configs") -> dict[tuple[str, str], RunConfig]:
    """{(renderer, conditioning): RunConfig} of the four training runs (see the module doc).

    Raises:
        EnerfError: no ``configs/<scene>.txt``.
    """
    base = scene_config(scene, config_dir)
    grid_file = config_dir / f"{scene}_grid.txt"
    grid_argv = ["--config", str(grid_file)] if grid_file.is_file() else ["--config", str(base), "--N_importance", "0"]
    if grid_renderer == "nerfacc":
        grid_argv += ["--cull_occluded", "false"]  # a torch_grid option (nerfacc refuses it)
    argv = {"grid": [*grid_argv, "--renderer", grid_renderer], "hierarchical": ["--config", str(base), "--renderer", "hierarchical"]}
    common = ["--basedir", basedir, "--seed", str(seed), "--device", device, "--no_lpips", "--quiet", "--kappa_every", "0"]
    parser = build_train_parser()
    return {(renderer, mode): run_config_from_args(parser.parse_args(
                [*argv[renderer], *common, "--conditioning", mode, "--expname", f"{renderer}_{mode}", *flags]))
            for renderer in RENDERER_RUNS for mode in CONDITIONINGS}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_for(cfg: RunConfig, seconds: float, data_root: Path, log) -> dict:
    """Train ``cfg`` for ``seconds`` of its own step time (the trainer's steps), then evaluate on
    all held-out views. Returns its figures (peak GPU memory null off CUDA)."""
    device = torch.device("cuda" if cfg.train.device == "cuda" else "cpu")
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    run = prepare_run(cfg, data_root)
    step_times: list[float] = []
    clock, next_report = 0.0, seconds / 4
    while clock < seconds or not step_times:
        _sync(device)
        tic = time.perf_counter()
        run.step(len(step_times))
        _sync(device)
        step_times.append(time.perf_counter() - tic)
        clock += step_times[-1]
        if clock >= next_report and clock < seconds:
            log(f"    {clock:7.1f} s, step {len(step_times)}")
            next_report += seconds / 4
    per_image = evaluate_views(run.scene, run.scene.i_test, run.fields, cfg.render, run.device, renderer=run.renderer)
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    batch = run.rays_per_step
    result = {
        "renderer": run.renderer.name, "conditioning": cfg.field.conditioning, "steps": len(step_times),
        "train_seconds": clock, "psnr": summarize(per_image, None)["psnr"], "held_out_views": len(per_image),
        "rays_per_second": batch.rays / clock, "median_step_seconds": statistics.median(step_times),
        "samples_per_ray": batch.samples_per_ray, "queries_per_ray": batch.queries_per_ray,
        "peak_gpu_memory_mib": peak,
    }
    del run
    return result


def training_section(args: argparse.Namespace, cuda_reason: str, log) -> dict:
    """Part 3: the four runs, and the row / none step-time ratio of each renderer."""
    on_cuda = torch.cuda.is_available() and args.device != "cpu"
    grid_renderer = "torch_grid" if cuda_reason else "nerfacc"
    device = "cuda" if on_cuda else "cpu"
    cfgs = run_configs(args.scene, grid_renderer, str(Path(args.out) / "runs"), args.seed, device, shlex.split(args.flags))
    runs = []
    for (renderer, mode), cfg in cfgs.items():
        log(f"  {cfg.render.sampler} / {mode}: {args.minutes:g} min of training ...")
        runs.append(train_for(cfg, args.minutes * 60, Path(args.data_root), log))
        r = runs[-1]
        log(f"    held-out PSNR {r['psnr']:.2f} dB after {r['steps']} steps, {r['rays_per_second']:.0f} rays / s"
            + (f", peak {r['peak_gpu_memory_mib']:.0f} MiB" if r["peak_gpu_memory_mib"] is not None else ""))
    ratios = {}
    for renderer in {r["renderer"] for r in runs}:
        step = {r["conditioning"]: r["median_step_seconds"] for r in runs if r["renderer"] == renderer}
        ratios[renderer] = step["row"] / step["none"]
    return {"scene": args.scene, "minutes_per_run": args.minutes, "device": device, "seed": args.seed,
            "flags": args.flags, "runs": runs, "row_over_none_step_time": ratios, "goal_row_over_none": 1.03,
            "peak_gpu_memory_reason": None if on_cuda else "no CUDA device: peak GPU memory not measured"}


# ----------------------------------------------------------------------------- report


def nerfacc_section() -> dict:
    """Part 1: does nerfacc's extension build and load here; how long that took; why not."""
    tic = time.perf_counter()
    ok, why = nerfacc_status(CUDA)  # builds (or loads) the extension once per process
    seconds = time.perf_counter() - tic
    return {"available": ok, "build_seconds": seconds if torch.cuda.is_available() else None, "reason": None if ok else why}


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def markdown(report: dict) -> str:
    """The report as markdown tables."""
    nerfacc = report["nerfacc"]
    lines = [f"# gpu_check: {report['device']}", "", f"`{report['command']}`", "",
             f"torch {report['torch']}, Python {report['python']}. nerfacc: "
             + (f"available (build / load {nerfacc['build_seconds']:.1f} s)" if nerfacc["available"]
                else f"not available ({nerfacc['reason']})"), "",
             "## Equality: nerfacc vs torch_grid on the same grid", "",
             "| case | occupied | torch_grid samples / ray | nerfacc samples / ray | ambiguous rays | count differs "
             "(promised rays) | max abs diff rgb / acc / depth (promised rays) |",
             "|---|---|---|---|---|---|---|"]
    for e in report["equality"]:
        diff = e["max_abs_diff"]
        shown = " / ".join(_fmt(diff[k], ".1e") for k in ("rgb", "acc", "depth")) if diff else f"n/a: {e['nerfacc_reason']}"
        differ = (f"{e['rays_with_different_counts']} ({e['different_counts_on_promised_rays']})"
                  if e["rays_with_different_counts"] is not None else "n/a")
        lines.append(f"| {e['case']} | {e['occupied_fraction']:.1%} | {e['torch_grid_samples_per_ray']:.1f} | "
                     f"{_fmt(e['nerfacc_samples_per_ray'], '.1f')} | {e['ambiguous_rays']} / {e['n_rays']} | {differ} | {shown} |")
    t = report["training"]
    lines += ["", f"## Training: {t['scene']}, {t['minutes_per_run']:g} min per run on {t['device']}, seed {t['seed']}", "",
              "| renderer | conditioning | steps | held-out PSNR (dB) | training rays / s | median step (ms) | peak GPU memory (MiB) |",
              "|---|---|---|---|---|---|---|"]
    for r in t["runs"]:
        lines.append(f"| {r['renderer']} | {r['conditioning']} | {r['steps']} | {r['psnr']:.2f} | {r['rays_per_second']:.0f} | "
                     f"{r['median_step_seconds'] * 1e3:.1f} | {_fmt(r['peak_gpu_memory_mib'], '.0f')} |")
    lines += ["", "Row / none median step time (goal <= 1.03): "
              + ", ".join(f"{k} {v:.3f}" for k, v in sorted(t["row_over_none_step_time"].items())), ""]
    if report["needed_cuda"]:
        lines += ["Not measured here (needs CUDA):", "", *(f"- {item}" for item in report["needed_cuda"]), ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/gpu_check", help="folder for gpu_check.json, gpu_check.md and the runs")
    parser.add_argument("--scene", default="fern", help="configs/<scene>.txt (and <scene>_grid.txt if present)")
    parser.add_argument("--minutes", type=float, default=10.0, help="training time of each of the four runs")
    parser.add_argument("--seed", type=int, default=0, help="seed of all four runs")
    parser.add_argument("--device", choices=("auto", "cpu"), default="auto",
                        help="cpu: use no CUDA even where there is some (nerfacc figures null, torch_grid trains)")
    parser.add_argument("--data_root", default="data", help="where scenes are found (as enerf train)")
    parser.add_argument("--flags", default="", help="extra enerf train flags for every run, e.g. '--datadir DIR'")
    parser.add_argument("--equality_rays", type=int, default=EQUALITY_RAYS, help="rays per equality case")
    args = parser.parse_args(argv)
    if not args.minutes > 0:
        parser.error(f"--minutes must be positive, got {args.minutes}")
    if args.equality_rays < 1:
        parser.error(f"--equality_rays must be positive, got {args.equality_rays}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)

    def log(text: str) -> None:
        print(text, flush=True)

    try:  # a missing config or scene is reported before anything slow runs
        cfg = run_configs(args.scene, "torch_grid", str(out / "runs"), args.seed, "cpu", shlex.split(args.flags))
        cfg = cfg[("hierarchical", "none")]
        resolve_scene_dir(cfg.data.scene, cfg.data.datadir, Path(args.data_root))
        log("[1/3] nerfacc ...")
        nerfacc = nerfacc_section() if args.device != "cpu" else {
            "available": False, "build_seconds": None, "reason": "--device cpu: CUDA not used"}
        log(f"  {'available' if nerfacc['available'] else 'not available: ' + nerfacc['reason']}")
        cuda_reason = "" if nerfacc["available"] else nerfacc["reason"]
        log(f"[2/3] equality, {args.equality_rays} rays per case ...")
        equality = equality_section(cuda_reason, args.equality_rays, log)
        log(f"[3/3] training on {args.scene}: 2 renderers x 2 conditionings, {args.minutes:g} min each ...")
        training = training_section(args, cuda_reason, log)
    except EnerfError as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    needed = []
    if cuda_reason:
        needed = [f"nerfacc build and status ({cuda_reason})",
                  "equality: nerfacc's rgb, acc, depth and samples per ray (torch_grid's side ran)",
                  "training with nerfacc (torch_grid ran in its place)"]
    if training["peak_gpu_memory_reason"]:
        needed.append("peak GPU memory of the training runs")
    report = {
        "command": "python -m benchmarks.gpu_check " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
        "device": torch.cuda.get_device_name(0) if training["device"] == "cuda"
        else f"CPU ({platform.processor() or platform.machine()})",
        "torch": torch.__version__, "python": platform.python_version(), "threads": torch.get_num_threads(),
        "nerfacc": nerfacc, "equality": equality, "training": training, "needed_cuda": needed,
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "gpu_check.json", json.dumps(report, indent=2) + "\n")
    atomic_write_text(out / "gpu_check.md", markdown(report))
    log(f"wrote {out / 'gpu_check.json'} and {out / 'gpu_check.md'}")
    if needed:
        log("needed CUDA (not measured here): " + "; ".join(needed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
