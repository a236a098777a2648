"""The capture samplers side by side: benchmarks/capture_proposal.json and docs/img/capture_samplers.png.

Reads the ``bench_real.json`` of each run (``benchmarks/real.py``) and writes one record and one
plot (held-out PSNR of the periodic evaluations against training time, each scene's two samplers)::

    python -m benchmarks.real --scene fox --datadir ../shared/data/nerfstudio/fox --config configs/capture_cpu.txt --out runs/bench_proposal
    python -m benchmarks.real --scene boardgame --datadir ../shared/data/captures/boardgame --config configs/capture_cpu.txt --out runs/bench_proposal
    python -m benchmarks.real --scene boardgame --datadir ../shared/data/captures/boardgame --config configs/capture_cpu.txt --out runs/bench_hierarchical -- --renderer hierarchical --N_samples 64 --video none
    python -m benchmarks.real --scene boardgame --datadir ../shared/data/captures/boardgame --config configs/capture_cpu.txt --out runs/bench_proposal_30min --minutes 30 -- --video none
    # the wall time of the capture config as it is (the preview video included)
    python -m benchmarks.real --scene fox --datadir ../shared/data/nerfstudio/fox --config configs/capture_cpu.txt --out runs/bench_wall
    python -m benchmarks.capture_samplers

The fox's hierarchical run is the ``enerf`` entry of ``benchmarks/capture_fox.json`` (the same
benchmark with the capture config of that time: hierarchical sampler, 64 samples a ray). The record's
``beer`` entry (the phone-video recipe) was written by an earlier version; benchmarks/video_recipe.py
measures the recipe now.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.harness import ROOT, write_record

MACHINE = "2 CPU cores (AMD EPYC, AVX2), no GPU, torch 2.14.1, nothing else running during the timed runs"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fox_proposal", default="runs/bench_proposal/fox-s0/bench_real.json")
    parser.add_argument("--fox_hierarchical", default="benchmarks/capture_fox.json",
                        help="a bench_real.json, or a record whose 'enerf' entry is one")
    parser.add_argument("--boardgame_proposal", default="runs/bench_proposal/boardgame-s0/bench_real.json")
    parser.add_argument("--boardgame_hierarchical", default="runs/bench_hierarchical/boardgame-s0/bench_real.json")
    parser.add_argument("--boardgame_30min", default="runs/bench_proposal_30min/boardgame-s0/bench_real.json")
    parser.add_argument("--fox_wall", default="runs/bench_wall/fox-s0/bench_real.json",
                        help="the capture config as it is, for its wall time")
    parser.add_argument("--out", default="benchmarks/capture_proposal.json")
    parser.add_argument("--plot", default="docs/img/capture_samplers.png")
    return parser.parse_args()


def read_run(path: str) -> dict:
    data = json.loads(Path(path).read_text())
    return data.get("enerf", data)


def views(run: dict) -> dict:
    """Mean, worst view and its gap below the mean (dB), per-view PSNRs, when the record has them."""
    per_view = run.get("per_view_psnr")
    if not per_view:
        return {}
    worst = min(per_view.values())
    return {"worst_view_psnr": worst, "worst_gap_db": run["psnr"] - worst, "per_view_psnr": per_view}


def entry(run: dict) -> dict:
    """The record's entry of one run; ``after_metrics_seconds``: wall time after metrics.json was
    written (the preview video, when the run made one)."""
    keep = ("psnr", "ssim", "steps", "train_seconds", "wall_seconds", "wall_parts", "load", "command", "history")
    parts, wall = run.get("wall_parts"), run.get("wall_seconds")
    return {**{k: run.get(k) for k in keep}, **views(run),
            "after_metrics_seconds": wall - parts["total"] if parts and wall else None,
            "train_psnr_last": run["history"][-1].get("train_psnr") if run.get("history") else None}


def plot(runs: dict[str, dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, scene in zip(axes, ("fox", "boardgame")):
        for name, style in (("proposal", "-o"), ("hierarchical", "--s"), ("proposal_30min", ":^")):
            run = runs.get(f"{scene}_{name}")
            if run is None:
                continue
            hist = run["history"][:-1]  # the periodic evaluations (the last entry scores every view)
            ax.plot([h["train_seconds"] / 60 for h in hist], [h["psnr"] for h in hist], style, ms=3,
                    label=name.replace("_30min", ", 30 min"))
        ax.set_title(scene)
        ax.set_xlabel("training time (min)")
        ax.set_ylabel("held-out PSNR (dB), periodic evaluations")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def main() -> int:
    args = parse_args()
    paths = {"fox_proposal": args.fox_proposal, "fox_hierarchical": args.fox_hierarchical,
             "boardgame_proposal": args.boardgame_proposal, "boardgame_hierarchical": args.boardgame_hierarchical,
             "boardgame_proposal_30min": args.boardgame_30min, "fox_wall": args.fox_wall}
    runs = {name: read_run(path) for name, path in paths.items() if Path(path).is_file()}
    missing = sorted(set(paths) - set(runs))
    if missing:
        print(f"capture_samplers: no record for {', '.join(missing)}; left out", file=sys.stderr)
    summary = {}
    if "fox_proposal" in runs and "fox_hierarchical" in runs:
        summary["fox"] = {"proposal": runs["fox_proposal"]["psnr"], "hierarchical": runs["fox_hierarchical"]["psnr"]}
    if "boardgame_proposal" in runs and "boardgame_hierarchical" in runs:
        summary["boardgame"] = {"proposal": runs["boardgame_proposal"]["psnr"],
                                "hierarchical": runs["boardgame_hierarchical"]["psnr"]}
    if "boardgame_proposal_30min" in runs and "boardgame_proposal" in runs:
        summary["boardgame_30min"] = {"10 min": runs["boardgame_proposal"]["psnr"],
                                      "30 min": runs["boardgame_proposal_30min"]["psnr"]}
    if "fox_wall" in runs:
        summary["fox_wall_minutes"] = round(runs["fox_wall"]["wall_seconds"] / 60, 1)
    record = {
        "what": "configs/capture_cpu.txt (proposal sampler: 128 proposal intervals, 48 samples a ray, distortion "
                "loss 0.002) against the same config with the hierarchical sampler (64 samples a ray, the capture "
                "config before), 10 minutes of training, seed 0, factor 4, every 8th frame held out (fox: 7 views, "
                "boardgame: 12); boardgame also with 30 minutes. PSNR is the mean of the per-view PSNRs; periodic "
                "evaluations score the first 2 held-out views every 500 steps, the last one all of them. fox_wall: "
                "the capture config as it is now (the first held-out view every 1,000 steps, a 40-frame preview "
                "video), for its wall time.",
        "command": "python -m benchmarks.capture_samplers (the bench_real commands in its docstring first)",
        "machine": MACHINE,
        "summary": summary,
        **{name: entry(run) for name, run in runs.items()},
    }
    out = ROOT / args.out
    write_record(out, record, indent=1)
    plot(runs, ROOT / args.plot)
    print(f"wrote {out} and {ROOT / args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
