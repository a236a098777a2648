"""Rays per second and held-out PSNR at fixed training times: the CUDA preset beside the CPU preset on
the same GPU, on the fox, the boardgame and fern; one JSON record (``device_bench.json``) with the
GPU's name and torch's and CUDA's versions. ``benchmarks/device_checks.sh`` runs it in one device
call (its comment holds the time budget). Alone, from the repository root::

    python -m benchmarks.device_bench --data ../shared/data --out gpu_out          # on a CUDA GPU
    python -m benchmarks.device_bench --dry-run --out /tmp/dry                      # CPU, CI-sized (seconds)

Each (scene, preset) is one ``enerf train`` run in this process with no config file
(``--preset cuda`` or ``--preset cpu``, ``--device cuda``), seed 0, ``--time_budget`` the largest of
its times, ``--eval_every 0 --video none --no_lpips``: the preset's own settings otherwise. At each
earlier time the loop's step hook (training clock paused) scores every held-out view; the last time
is the run's own end (its ``metrics.json``). An earlier time is a point inside the longer run,
whose learning rate has not cooled down there as it would in a run of that budget.

Per time (``marks``): training seconds, steps, rays, ``rays_per_second`` = rays_per_step x steps /
seconds, held-out PSNR. Per scene: the CUDA preset's rays per second over the CPU preset's at each
one's last time. ``targets``: issue 48's figures, each with what was measured (null where the times
did not include it). ``--dry-run``: a tiny synthetic scene (``enerf data synth``'s, 96 x 72, 8
views) forward-facing and as a walk-around (``--scene_kind walkaround``: the capture presets), both
presets on the CPU, 1 and 2 s of training.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

import torch

from enerf.cli.train import build_train_parser, train_config
from enerf.config import DATA_ROOT
from enerf.config.presets import preset_line
from enerf.errors import EnerfError
from enerf.train.evaluate import evaluate_views, summarize
from enerf.train.nerf import train_nerf

from benchmarks.harness import command_line, git_commit, load_average, write_record

__all__ = ["SCENES", "TARGETS", "MarkHook", "train_with_marks", "targets", "main"]

# scene -> its folder under --data and the flags it needs (none: enerf train decides from the folder)
SCENES = {"fox": ("nerfstudio/fox", []), "boardgame": ("captures/boardgame", []), "fern": ("nerf_llff_data/fern", []),
          "lego": ("nerf_synthetic/lego", [])}
DRY_SCENES = {"tiny_forward": [], "tiny_walkaround": ["--scene_kind", "walkaround"]}
# issue 48's figures: (what, scene, preset, seconds or None for the run's end, key, at least)
TARGETS = [("fox: held-out PSNR after 60 s, CUDA preset", "fox", "cuda", 60.0, "psnr", 31.5),
           ("fox: rays / s of the capture preset on CUDA", "fox", "cuda", None, "rays_per_second", 283_000.0),
           ("boardgame: rays / s of the capture preset on CUDA", "boardgame", "cuda", None, "rays_per_second", 283_000.0),
           ("fern: held-out PSNR after 300 s, CUDA preset", "fern", "cuda", 300.0, "psnr", 26.0)]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def mark_record(seconds: float, steps: int, rays: int, psnr: float | None) -> dict:
    """One time mark: rays per step and per second from the same counts (rays_per_second =
    rays_per_step * steps / seconds)."""
    return {"seconds": seconds, "steps": steps, "rays": rays, "rays_per_step": rays / max(steps, 1),
            "rays_per_second": rays / seconds if seconds > 0 else None, "psnr": psnr}


class MarkHook:
    """The training loop's step hook: when the training clock passes the next of ``marks``
    (seconds), score every held-out view (the clock is paused) and keep a ``mark_record``."""

    def __init__(self, marks: list[float]) -> None:
        self.left = sorted(marks)
        self.records: list[dict] = []

    def __call__(self, run, done: int) -> None:
        seconds = run.loop.train_seconds
        if not self.left or seconds < self.left[0]:
            return
        while self.left and seconds >= self.left[0]:
            mark = self.left.pop(0)
        _sync(run.device)
        per_image = evaluate_views(run.scene, run.scene.i_test, run.fields, run.cfg.render, run.device,
                                   renderer=run.renderer, progress=False, stride=run.cfg.train.eval_stride)
        record = mark_record(seconds, done, run.rays_per_step.rays, summarize(per_image, None)["psnr"])
        self.records.append({"mark": mark, **record})


def train_with_marks(argv: list[str], times: list[float], log) -> dict:
    """``enerf train argv`` (no config file) with ``--time_budget max(times)``, scored at every time."""
    budget = max(times)
    args = build_train_parser().parse_args([*argv, "--time_budget", str(budget), "--eval_every", "0", "--video", "none",
                                            "--no_lpips", "--quiet"])
    cfg, preset, device, why = train_config(args, DATA_ROOT)  # enerf.config.resolve, as enerf train
    line = preset_line(preset, args.preset, device, why)
    log(f"  {line}")
    hook = MarkHook([t for t in times if t < budget])
    on_cuda = device == "cuda"
    if on_cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    tic = time.perf_counter()
    metrics = train_nerf(cfg, data_root=DATA_ROOT, progress=False, on_step=hook)
    wall = time.perf_counter() - tic
    steps, seconds = metrics["steps"], metrics["train_seconds"]
    end = mark_record(seconds, steps, round(metrics["rays_per_step"] * steps), metrics["psnr"])
    marks = [*hook.records, {"mark": budget, **end}]
    for m in marks:
        log(f"    {m['mark']:g} s: step {m['steps']}, {m['rays_per_second']:,.0f} rays/s, held-out PSNR {m['psnr']:.2f} dB")
    return {"preset": preset.name, "preset_file": f"{preset.recipe}.txt", "device": device, "start_line": line,
            "time_budget": budget, "factor": cfg.data.factor, "n_rand": cfg.train.n_rand,
            "renderer": metrics["renderer"], "held_out_views": len(metrics["per_image"]), **end,
            "ssim": metrics["ssim"], "marks": marks, "wall_seconds": wall, "load_seconds": metrics["wall_seconds"]["load"],
            "peak_gpu_memory_mib": torch.cuda.max_memory_allocated() / 2**20 if on_cuda else None}


def targets(runs: list[dict]) -> list[dict]:
    """Each of ``TARGETS`` with the figure measured (None where no run had that scene, preset and time)."""
    out = []
    for what, scene, preset, seconds, key, least in TARGETS:
        value = None
        for run in runs:
            if run["scene"] != scene or run["preset"] != preset:
                continue
            marks = [m for m in run["marks"] if seconds is None or m["mark"] == seconds]
            if marks:
                value = marks[-1][key]
        out.append({"what": what, "at_least": least, "measured": value,
                    "met": None if value is None else bool(value >= least)})
    return out


def ratios(runs: list[dict]) -> dict[str, float]:
    """Per scene: the CUDA preset's rays per second over the CPU preset's (each at its run's end)."""
    by = {(r["scene"], r["preset"]): r["rays_per_second"] for r in runs}
    return {scene: by[(scene, "cuda")] / by[(scene, "cpu")] for scene, preset in by
            if preset == "cuda" and by.get((scene, "cpu"))}


def device_info(device: str) -> dict:
    """The machine: GPU name, torch's and CUDA's versions, nerfacc's, Python's, torch's CPU threads."""
    try:
        nerfacc = metadata.version("nerfacc")
    except metadata.PackageNotFoundError:
        nerfacc = None
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else None
    return {"gpu": gpu, "name": gpu or f"CPU ({platform.processor() or platform.machine()})",
            "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "nerfacc": nerfacc, "python": platform.python_version(), "threads": torch.get_num_threads()}


def _times(text: str) -> list[float]:
    values = [float(t) for t in text.replace(",", " ").split()]
    if any(not (t > 0 and math.isfinite(t)) for t in values):
        raise argparse.ArgumentTypeError(f"times must be positive seconds, got {text!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data", help="folder holding nerfstudio/fox, captures/boardgame, ...")
    parser.add_argument("--out", default="gpu_out", help="folder for device_bench.json and the runs")
    parser.add_argument("--scenes", default="fox boardgame fern", help=f"of {', '.join(SCENES)}")
    parser.add_argument("--times", type=_times, default=None, help="seconds of training at which the CUDA preset is "
                        "scored (the run's budget: the largest); default 30 60, dry run 1 2")
    parser.add_argument("--cpu_times", type=_times, default=None, help="the same for the CPU preset on the same device "
                        "('' : no CPU-preset runs); default 30, dry run 1")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default cuda, dry run cpu")
    parser.add_argument("--dry-run", dest="dry_run", action="store_true",
                        help="CI-sized: a tiny synthetic scene, forward-facing and walk-around, on the CPU")
    args = parser.parse_args(argv)
    args.times = args.times if args.times is not None else ([1.0, 2.0] if args.dry_run else [30.0, 60.0])
    args.cpu_times = args.cpu_times if args.cpu_times is not None else ([1.0] if args.dry_run else [30.0])
    args.device = args.device or ("cpu" if args.dry_run else "cuda")
    if not args.times:
        parser.error("--times needs at least one time")
    return args


def scene_list(args: argparse.Namespace, out: Path) -> tuple[dict[str, tuple[Path, list[str]]], dict[str, str]]:
    """(scene -> (folder, flags) of the scenes found, scene -> why it is missing)."""
    if args.dry_run:
        from enerf.synthetic.scene import make_synthetic_scene

        folder = make_synthetic_scene(out / "data" / "tiny", n_views=8, width=96, height=72, seed=0)
        return {name: (folder, flags) for name, flags in DRY_SCENES.items()}, {}
    found, missing = {}, {}
    for name in args.scenes.replace(",", " ").split():
        if name not in SCENES:
            missing[name] = f"not one of {', '.join(SCENES)}"
            continue
        folder = Path(args.data) / SCENES[name][0]
        if folder.is_dir():
            found[name] = (folder.resolve(), SCENES[name][1])
        else:
            missing[name] = f"{folder} is not there"
    return found, missing


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("device_bench: --device cuda but torch sees no CUDA GPU; --dry-run runs on the CPU", file=sys.stderr)
        return 2

    def log(text: str) -> None:
        print(text, flush=True)

    scenes, missing = scene_list(args, out)
    plan = [(s, p, t) for s in scenes for p, t in (("cuda", args.times), ("cpu", args.cpu_times)) if t]
    record = {"what": "rays per second and held-out PSNR at fixed training times, enerf train with no config file: "
                      "the CUDA preset beside the CPU preset on the same device (benchmarks/device_bench.py)",
              "command": command_line(None if argv is None else [__file__, *argv]), "commit": git_commit(), "dry_run": args.dry_run,
              "machine": device_info(args.device), "times": {"cuda": args.times, "cpu": args.cpu_times},
              "load_before": load_average(), "missing": missing, "runs": [], "complete": False}
    path = out / "device_bench.json"
    for k, (scene, preset, times) in enumerate(plan, 1):
        folder, flags = scenes[scene]
        log(f"[{k}/{len(plan)}] {scene}, --preset {preset}, {' '.join(f'{t:g}' for t in times)} s ...")
        argv_run = ["--datadir", str(folder), *flags, "--preset", preset, "--device", args.device, "--seed", "0",
                    "--basedir", str(out / "runs"), "--expname", f"{scene}_{preset}"]
        try:
            run = train_with_marks(argv_run, times, log)
        except EnerfError as exc:  # one line, and the other runs go on
            log(f"    failed: {exc}")
            record["runs"].append({"scene": scene, "preset": preset, "error": str(exc)})
            continue
        record["runs"].append({"scene": scene, "datadir": str(folder), "flags": flags, **run})
        write_record(path, {**record, "load_after": load_average()})  # a killed call keeps the runs so far
    done = [r for r in record["runs"] if "error" not in r]
    record.update(ratio_cuda_over_cpu_rays_per_second=ratios(done), targets=targets(done), complete=True,
                  load_after=load_average())
    write_record(path, record)
    for scene, ratio in record["ratio_cuda_over_cpu_rays_per_second"].items():
        log(f"{scene}: the CUDA preset makes {ratio:.2f}x the CPU preset's rays per second")
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
