"""The weight-conditioning paper's claim with the paper's own networks (docs/paper.md).

``run``: the study's ``enerf compare`` commands, one after the other (each resumes or skips
what is already done, so the study can be stopped and continued):

* ``fern`` / ``lego``: configs/paper_{fern,lego}_cpu.txt, none vs row, seeds 0-2, two runs at
  a time with one thread each;
* ``fern_lr``: learning rates x 0.5, x 1 and x 2 for both, seed 0 (the x 1 runs are those of
  ``fern``, linked, when it ran first);
* ``occupancy`` / ``sdf``: configs/shape_paper_cpu.txt on the bunny, the armadillo and the
  fan disk (``studies/real_meshes.py``), none vs row, seeds 0-2.

``record``: reads what the compares wrote (compare.csv, each run's metrics.json, the plots) and
writes ``benchmarks/paper_study.json`` and the figures ``docs/img/paper_*.png``.

    python -m studies.real_meshes
    python -m studies.paper_study run              # about 2 hours on 2 cores
    python -m studies.paper_study record
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import ROOT, TRAINING_CODE, git_commit, machine, write_record


# what the study measures: the NeRF and shape training code, the compares, the three configs
DEPENDS = TRAINING_CODE + ["enerf/shapes", "enerf/compare", "configs/paper_fern_cpu.txt", "configs/paper_lego_cpu.txt", "configs/shape_paper_cpu.txt"]
DATA = Path("../shared/data")  # relative to the checkout, where the compares run (and as their records say)
MESHES = ["bunny", "data/meshes/armadillo.off", "data/meshes/fandisk.off"]
NERF_SEEDS = ["0", "1", "2"]

STUDY: dict[str, list[str]] = {
    "fern": ["--scenes", str(DATA / "nerf_llff_data" / "fern"), "--config", "configs/paper_fern_cpu.txt",
             "--modes", "none", "row", "--seeds", *NERF_SEEDS, "--out", "runs/paper_fern"],
    "lego": ["--scenes", str(DATA / "nerf_synthetic" / "lego"), "--config", "configs/paper_lego_cpu.txt",
             "--modes", "none", "row", "--seeds", *NERF_SEEDS, "--out", "runs/paper_lego"],
    "fern_lr": ["--scenes", str(DATA / "nerf_llff_data" / "fern"), "--config", "configs/paper_fern_cpu.txt",
                "--modes", "none", "none*0.5", "none*2", "row", "row*0.5", "row*2", "--seeds", "0",
                "--out", "runs/paper_fern_lr"],
    "occupancy": ["--task", "shape", "--scenes", *MESHES, "--config", "configs/shape_paper_cpu.txt",
                  "--modes", "none", "row", "--seeds", *NERF_SEEDS, "--out", "runs/paper_occupancy",
                  "--", "--kind", "occupancy"],
    "sdf": ["--task", "shape", "--scenes", *MESHES, "--config", "configs/shape_paper_cpu.txt",
            "--modes", "none", "row", "--seeds", *NERF_SEEDS, "--out", "runs/paper_sdf", "--", "--kind", "sdf"],
}
# Vanilla, seed 0, one thread, 20 minutes of training: fresh runs, the two at once (one core each),
# after the compares, with nothing else running.
TWENTY_MINUTES = {scene: f"OMP_NUM_THREADS=1 enerf train --config configs/paper_{scene}_cpu.txt --datadir "
                         f"{DATA / folder / scene} --basedir runs/paper_20min --expname {scene} --iters 100000 "
                         "--time_budget 1200 --eval_every 200"
                  for scene, folder in (("fern", "nerf_llff_data"), ("lego", "nerf_synthetic"))}
FIGURES = {"fern": ("psnr_curves", "train_psnr_curves", "conditioning", "side_by_side"),
           "lego": ("psnr_curves", "train_psnr_curves", "conditioning", "side_by_side")}


def command(name: str) -> list[str]:
    args = STUDY[name]
    split = args.index("--") if "--" in args else len(args)
    return ["enerf", "compare", *args[:split], "--jobs", "2", *args[split:]]


def out_dir(name: str) -> Path:
    args = STUDY[name]
    return ROOT / args[args.index("--out") + 1]


def _link_shared_runs() -> None:
    """fern_lr's x 1 runs are seed 0 of fern: link them (compare skips a finished run launched alike)."""
    for mode in ("none", "row"):
        src, dst = out_dir("fern") / "runs" / f"fern-{mode}-s0", out_dir("fern_lr") / "runs" / f"fern-{mode}-s0"
        if (src / "metrics.json").is_file() and not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.symlink_to(src.resolve(), target_is_directory=True)


def run(names: list[str]) -> int:
    for name in names:
        if name == "fern_lr":
            _link_shared_runs()
        print("$", " ".join(command(name)), flush=True)
        rc = subprocess.run(command(name), cwd=ROOT).returncode
        if rc != 0:
            return rc
    return 0


def _rows(name: str) -> list[dict]:
    with open(out_dir(name) / "compare.csv", newline="") as f:
        return list(csv.DictReader(f))


def _runs(name: str) -> dict[str, dict]:
    """metrics.json of every run of one compare, by run folder name (<scene>-<mode>-s<seed>)."""
    return {p.parent.name: json.loads(p.read_text()) for p in sorted((out_dir(name) / "runs").glob("*/metrics.json"))}


def _number(text: str) -> float | None:
    return None if text in ("", "n/a") else float(text)


def _kappa(metrics: dict) -> dict:
    """Per conditioned layer: κ(W) and κ(EW) at the first and the last record."""
    history = metrics.get("kappa_history") or []
    if not history:
        return {}
    first, last = history[0], history[-1]
    return {layer: {"first_step": first["step"], "kappa_W_first": first["layers"][layer][0],
                    "kappa_EW_first": first["layers"][layer][1], "last_step": last["step"],
                    "kappa_W_last": last["layers"][layer][0], "kappa_EW_last": last["layers"][layer][1]}
            for layer in last["layers"]}


def _kappa_ratio(name: str) -> dict:
    """κ(EW) / κ(W) over the conditioned (hidden) layers and every record of the compare's row runs:
    min, max and how many."""
    ratios = [ew / w for run, m in _runs(name).items() if "-row-" in run
              for record in m.get("kappa_history") or [] for layer, (w, ew) in record["layers"].items()
              if layer.startswith(("trunk.", "hidden.")) and w > 0]
    return {"min": round(min(ratios), 3), "max": round(max(ratios), 3), "n": len(ratios)} if ratios else {}


def _nerf_record(name: str) -> dict:
    runs = _runs(name)
    per_run = {run: {"psnr": m["psnr"], "ssim": m["ssim"], "steps": m["steps"],
                     "train_seconds": round(m["train_seconds"], 1),
                     "history": [{k: h.get(k) for k in ("step", "train_seconds", "psnr", "train_psnr")}
                                 for h in m["history"]]}
               for run, m in runs.items()}
    kappa = {run: _kappa(m) for run, m in runs.items() if run.endswith("-s0")}
    return {"command": " ".join(command(name)), "table": _rows(name), "runs": per_run, "kappa_seed0": kappa}


def _shape_record(name: str) -> dict:
    runs = _runs(name)
    keys = ("iou", "chamfer_l1", "normal_consistency", "fscore", "steps", "train_seconds")
    return {"command": " ".join(command(name)), "table": _rows(name),
            "runs": {run: {k: m.get(k) for k in keys} for run, m in runs.items()},
            "kappa_seed0": {run: _kappa(m) for run, m in runs.items() if run.endswith("-s0")}}


def _delta(rows: list[dict], scene: str, metric: str, digits: int) -> dict:
    """row vs none on one scene: the means, Δ and its paired 95 % interval, rounded."""
    none = next(r for r in rows if r["scene"] == scene and r["mode"] == "none")
    row = next(r for r in rows if r["scene"] == scene and r["mode"] == "row")
    return {f"{scene}_none": round(float(none[f"{metric}_mean"]), digits),
            f"{scene}_row": round(float(row[f"{metric}_mean"]), digits),
            f"{scene}_delta": round(float(row[f"{metric}_delta_vs_none"]), digits),
            f"{scene}_ci_low": round(float(row[f"{metric}_delta_ci95_low"]), digits),
            f"{scene}_ci_high": round(float(row[f"{metric}_delta_ci95_high"]), digits)}


def record() -> int:
    out: dict = {
        "what": "the paper's networks on one CPU core per run (two runs at a time): NeRF 8 x 256 on fern and lego "
                "(configs/paper_{fern,lego}_cpu.txt), shape networks 8 x 256 on three meshes "
                "(configs/shape_paper_cpu.txt); none vs row, seeds 0-2, equal steps; mean ± sample std, Δ vs none with "
                "the paired 95 % t interval (enerf compare's compare.csv)",
        "machine": machine(), "commit": git_commit(), "depends": DEPENDS,
    }
    for name in STUDY:
        if (out_dir(name) / "compare.csv").is_file():
            out[name] = (_shape_record if name in ("occupancy", "sdf") else _nerf_record)(name)
    for scene in ("fern", "lego"):  # 20 minutes on one core (TWENTY_MINUTES)
        path = ROOT / "runs" / "paper_20min" / scene / "metrics.json"
        if path.is_file():
            m = json.loads(path.read_text())
            out.setdefault("twenty_minutes", {})[scene] = {
                "command": TWENTY_MINUTES[scene], "psnr": m["psnr"], "ssim": m["ssim"], "steps": m["steps"],
                "train_seconds": round(m["train_seconds"], 1), "steps_per_second": round(m["steps"] / m["train_seconds"], 3),
                "history": [{k: h.get(k) for k in ("step", "train_seconds", "psnr", "train_psnr")} for h in m["history"]]}
    summary: dict = {}
    if "fern" in out and "lego" in out:  # the README's row: Δ [CI] on fern, then on lego
        nerf = {**_delta(out["fern"]["table"], "fern", "psnr", 2), **_delta(out["lego"]["table"], "lego", "psnr", 2)}
        summary["nerf"] = {k: v for k, v in nerf.items() if not k.endswith(("_none", "_row"))}
        summary["nerf_means"] = {k: v for k, v in nerf.items() if k.endswith(("_none", "_row"))}
    for kind, metric, digits in (("occupancy", "iou", 4), ("sdf", "iou", 4)):
        if kind in out:
            summary[kind] = {k: v for scene in ("bunny", "armadillo", "fandisk")
                             for k, v in _delta(out[kind]["table"], scene, metric, digits).items()}
    summary["kappa_ratio_row"] = {name: _kappa_ratio(name) for name in STUDY if name in out and name != "fern_lr"}
    out["summary"] = summary
    write_record(ROOT / "benchmarks" / "paper_study.json", out)
    for name, figures in FIGURES.items():
        for figure in figures:
            src = out_dir(name) / f"{figure}.png"
            if src.is_file():
                shutil.copyfile(src, ROOT / "docs" / "img" / f"paper_{name}_{figure}.png")
    print(json.dumps(summary, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    run_parser = sub.add_parser("run", help="run the study's compares")
    run_parser.add_argument("names", nargs="*", help=f"compares to run (default: all of {', '.join(STUDY)})")
    sub.add_parser("record", help="write benchmarks/paper_study.json and docs/img/paper_*.png")
    args = parser.parse_args(argv)
    if args.what == "record":
        return record()
    unknown = [n for n in args.names if n not in STUDY]
    if unknown:
        print(f"unknown compare {unknown[0]!r}: choose from {', '.join(STUDY)}", file=sys.stderr)
        return 2
    return run(args.names or list(STUDY))


if __name__ == "__main__":
    sys.exit(main())
