"""nerfacto beside ``configs/capture_cpu.txt`` on the fox: score its checkpoints, then write the record.

Two steps (how nerfacto is installed, changed to run offline and trained: benchmarks/README.md,
"nerfacto beside capture_cpu.txt on the fox")::

    # in nerfacto's own venv (imports nerfstudio; TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 under torch 2.14)
    python -m benchmarks.nerfacto_peer score OUT/config.yml --steps 120 --out eval_final.json
    python -m benchmarks.nerfacto_peer score OUT/config.yml --steps 10 20 50 80 100 --views 0 1 --stride 2 --out eval_curve.json
    # in enerf's environment: benchmarks/capture_fox.json and docs/img/fox_nerfacto.png
    python -m benchmarks.nerfacto_peer record --enerf_run runs/bench_real/fox-s0 --final eval_final.json --curve eval_curve.json

``score`` renders each chosen checkpoint's held-out views through nerfstudio's own cameras
(lens distortion in the rays) and scores PSNR against nerfstudio's own frames, every ``--stride``-th
row and column; PSNR is the mean of the per-view PSNRs, as enerf's. A checkpoint's training time is
the sum of the run's per-step "Train Iter (time)" up to it (train with
``--logging.max-buffer-size 1`` so that each value is one step's). Progress: one line per view.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from benchmarks.harness import ROOT, write_record


def train_seconds(run_dir: Path) -> dict[int, float]:
    """Training seconds after each step: the running sum of TensorBoard's "Train Iter (time)"."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tag = next(t for t in acc.Tags()["scalars"] if t.startswith("Train Iter"))
    per_step = {ev.step: ev.value for ev in acc.Scalars(tag)}
    total, out = 0.0, {}
    for step in sorted(per_step):
        total += per_step[step]
        out[step] = total
    return out


def score(args: argparse.Namespace) -> int:
    import torch
    from nerfstudio.utils.eval_utils import eval_setup

    config_path = Path(args.config)

    def first_step(config):
        config.load_step = args.steps[0]
        return config

    config, pipeline, _, _ = eval_setup(config_path, test_mode="test", update_config_callback=first_step)
    dataset = pipeline.datamanager.eval_dataset
    views = args.views or list(range(len(dataset)))
    seconds = train_seconds(config_path.parent)
    results = []
    for step in args.steps:
        state = torch.load(config.get_checkpoint_dir() / f"step-{step:09d}.ckpt", map_location="cpu", weights_only=False)
        pipeline.load_pipeline(state["pipeline"], state["step"])
        pipeline.eval()
        start, per_view = time.time(), []
        for i in views:
            rays = dataset.cameras[i: i + 1].generate_rays(camera_indices=0, keep_shape=True)[:: args.stride, :: args.stride]
            with torch.no_grad():
                rgb = pipeline.model.get_outputs_for_camera_ray_bundle(rays)["rgb"].clamp(0, 1)
            gt = dataset[i]["image"][:: args.stride, :: args.stride, :3].to(rgb)
            per_view.append(-10 * math.log10(float(((rgb - gt) ** 2).double().mean())))
            print(f"step {step} view {dataset.image_filenames[i].name}: {per_view[-1]:.3f} dB "
                  f"({time.time() - start:.0f} s)", flush=True)
        # a checkpoint named step-N holds the state after steps 0..N: N + 1 updates
        results.append({"step": step, "updates": step + 1, "train_seconds": seconds.get(step),
                        "psnr": sum(per_view) / len(per_view), "psnr_per_view": per_view,
                        "eval_seconds": time.time() - start})
        out = Path(args.out)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps({"config": str(config_path), "views": [dataset.image_filenames[i].name for i in views],
                                   "stride": args.stride, "results": results}, indent=1))
        tmp.replace(out)
    return 0


def at_or_before(curve: list[tuple[float, float]], seconds: float) -> tuple[float, float] | None:
    """The last (seconds, psnr) point at or before ``seconds`` (1 % slack, as bench_real)."""
    done = [p for p in curve if p[0] <= seconds * 1.01]
    return done[-1] if done else None


def record(args: argparse.Namespace) -> int:
    from matplotlib.figure import Figure

    from enerf.atomic import atomic_write_bytes
    from enerf.compare.plots import figure_png

    run = Path(args.enerf_run)
    enerf = json.loads((run / "bench_real.json").read_text())
    per_image = json.loads((run / "metrics.json").read_text())["per_image"]
    final = json.loads(Path(args.final).read_text())
    curve = json.loads(Path(args.curve).read_text())
    last = final["results"][-1]
    n = len(curve["views"])  # the curve's views: the first n held-out views, as enerf's periodic evaluations
    # enerf: periodic evaluations, then its final evaluation's first n views; nerfacto likewise
    enerf_curve = [(h["train_seconds"], h["psnr"]) for h in enerf["history"][:-1]]
    enerf_curve.append((enerf["history"][-1]["train_seconds"], sum(p["psnr"] for p in per_image[:n]) / n))
    peer_curve = [(c["train_seconds"], c["psnr"]) for c in curve["results"]]
    peer_curve.append((last["train_seconds"], sum(last["psnr_per_view"][:n]) / n))
    gaps = [p["psnr"] - q for p, q in zip(per_image, last["psnr_per_view"])]
    marks = {f"{m:g}s": {"enerf": at_or_before(enerf_curve, m), "nerfacto": at_or_before(peer_curve, m)}
             for m in (120.0, 300.0, 420.0, 600.0)}
    rec = {
        "what": "configs/capture_cpu.txt on instant-ngp's fox (50 of 67 frames present; factor 4), every 8th frame "
                "held out (7 views), 10 minutes of training time on 2 CPU cores; nerfstudio's nerfacto at its defaults "
                "(torch implementation, CPU) on the same frames and split, on the same idle machine, one after the "
                "other. PSNR is the mean of the per-view PSNRs. The curves score the first "
                f"{n} held-out views (nerfacto on every {curve['stride']}-th pixel row and column), the 10-minute "
                "figures all 7 on every pixel.",
        "command": "python -m benchmarks.real --scene fox --datadir ../shared/data/nerfstudio/fox --config configs/capture_cpu.txt",
        "peer_commands": __doc__.split("::")[1].split("``score``")[0].strip(),
        "machine": "2 CPU cores (AMD EPYC, AVX2), no GPU, torch 2.14.1, nothing else running during training",
        "summary": {"psnr": round(enerf["psnr"], 2), "nerfacto_psnr": round(last["psnr"], 2)},
        "per_view_gap_db": {"min": min(gaps), "max": max(gaps)},
        "curves": {"enerf": enerf_curve, "nerfacto": peer_curve, "at_or_before": marks},
        "enerf": enerf,
        "nerfacto": {"final": last, "final_views": final["views"], "curve": curve["results"],
                     "curve_views": curve["views"], "curve_stride": curve["stride"]},
    }
    if args.cuda_metrics:
        cuda = json.loads(Path(args.cuda_metrics).read_text())
        rec["enerf_cuda_60s"] = {k: cuda[k] for k in ("psnr", "ssim", "steps", "train_seconds", "per_image")} | {
            "device": args.cuda_device,
            "command": "enerf train --config configs/capture_cpu.txt --datadir ../shared/data/nerfstudio/fox "
                       "--device cuda --time_budget 60"}
    write_record(args.out, rec, indent=1)

    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.subplots()
    ax.plot(*zip(*enerf_curve), "o-", label="enerf, configs/capture_cpu.txt")
    ax.plot(*zip(*peer_curve), "s-", label="nerfacto (nerfstudio)")
    ax.plot([enerf["train_seconds"]], [enerf["psnr"]], "o", mfc="none", ms=10, color="C0", label="all 7 held-out views")
    ax.plot([last["train_seconds"]], [last["psnr"]], "s", mfc="none", ms=10, color="C1")
    ax.set_xlabel("training time (s), 2 CPU cores")
    ax.set_ylabel("held-out PSNR (dB)")
    ax.set_title(f"instant-ngp fox, factor 4, first {n} held-out views (open: all 7)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    atomic_write_bytes(Path(args.plot), figure_png(fig))
    print(json.dumps({"summary": rec["summary"], "per_view_gap_db": rec["per_view_gap_db"], "at_or_before": marks}, indent=1))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("score", help="PSNR of nerfacto checkpoints on held-out views (in nerfacto's venv)")
    s.add_argument("config", help="the run's config.yml")
    s.add_argument("--steps", type=int, nargs="+", required=True, help="checkpoint steps (step-N.ckpt)")
    s.add_argument("--views", type=int, nargs="*", default=None, help="indices into the held-out split (default all)")
    s.add_argument("--stride", type=int, default=1, help="score every s-th pixel row and column")
    s.add_argument("--out", required=True)
    r = sub.add_parser("record", help="benchmarks/capture_fox.json and its plot")
    r.add_argument("--enerf_run", default="runs/bench_real/fox-s0", help="the bench_real run folder")
    r.add_argument("--final", required=True, help="score output: the 10-minute checkpoint on all views")
    r.add_argument("--curve", required=True, help="score output: the curve")
    r.add_argument("--cuda_metrics", default=None, help="metrics.json of the --device cuda run, if any")
    r.add_argument("--cuda_device", default="one NVIDIA H100 80GB HBM3, torch 2.11.0+cu130")
    r.add_argument("--out", default=str(ROOT / "benchmarks" / "capture_fox.json"))
    r.add_argument("--plot", default=str(ROOT / "docs" / "img" / "fox_nerfacto.png"))
    args = parser.parse_args()
    return score(args) if args.verb == "score" else record(args)


if __name__ == "__main__":
    sys.exit(main())
