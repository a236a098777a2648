"""The 2 x 2 record: conditioning {none, row} x weights at step 0 {vanilla, equilibrated}, from
the run folders of ``enerf compare`` (one per setting), into benchmarks/conditioning_2x2.json.

The four cells are the modes ``none`` (vanilla), ``row`` (E-NeRF), ``none~equilibrated`` (plain
training from row's step-0 function) and ``row~vanilla`` (row with its applied weights scaled to
vanilla's Frobenius norm per layer at step 0). For every seed present in both cells of a
contrast it computes the paired differences of the final held-out PSNR:

    conditioning at vanilla's start        row~vanilla       - none
    conditioning at the equilibrated start row               - none~equilibrated
    initial scale without conditioning     none~equilibrated - none
    initial scale under row                row               - row~vanilla

(the whole E-NeRF gain, row - none, is the sum of either pair), each with its mean and, with two
or more seeds, the 95 % Student-t interval; and the curve of every cell: at each periodic
evaluation the training-batch PSNR (``train_psnr``) and the periodic held-out PSNR (the views
the config's ``eval_views`` names; the last point scores all of them), means over seeds.

    python -m studies.cond_2x2 --setting fern=runs/cond_fern \\
        --command fern="enerf compare --scenes ../shared/data/nerf_llff_data/fern ..." \\
        --from_record fern=benchmarks/paper_study.json

``--control NAME=FOLDER`` adds the learning-rate-matched control: the runs of another ``enerf
compare`` folder (vanilla at twice the rates, ``--modes 'none*2'``) set against the setting's
``row`` cell, per seed (``lr_control`` in the record).

``--from_record NAME=FILE`` takes the ``none`` and ``row`` runs of that setting from an earlier
record (``FILE``'s ``NAME.runs``: ``<scene>-<mode>-s<seed>`` with psnr, ssim, steps, history)
where the compare folder has none; ``cell_sources`` in the record says which cells came from where.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy import stats

from benchmarks.harness import ROOT, load_average, write_record


CELLS = ("none", "row", "none~equilibrated", "row~vanilla")
CONTRASTS = {
    "conditioning_at_vanilla_start": ("row~vanilla", "none"),
    "conditioning_at_equilibrated_start": ("row", "none~equilibrated"),
    "initial_scale_without_conditioning": ("none~equilibrated", "none"),
    "initial_scale_under_row": ("row", "row~vanilla"),
    "enerf_gain": ("row", "none"),
}


def paired(diffs: list[float]) -> dict:
    d = np.asarray(diffs, dtype=float)
    out = {"n_seeds": int(d.size), "per_seed": d.tolist(), "mean": float(d.mean()) if d.size else None}
    if d.size >= 2:
        half = float(stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size))
        out["ci95"] = [out["mean"] - half, out["mean"] + half]
    return out


def read_setting(folder: Path, partial: bool = False) -> dict:
    """{mode: {seed: metrics}} of the finished runs under ``folder``/runs; with ``partial`` also the
    unfinished ones, from their last checkpoint: ``{"psnr": None, "steps": step reached, "history":
    the periodic evaluations so far, "unfinished": True}``."""
    found: dict = {m: {} for m in CELLS}
    for record in sorted((folder / "runs").glob("*/compare_run.json")):
        info = json.loads(record.read_text())
        metrics = record.parent / "metrics.json"
        mode, seed = info["signature"]["mode"], info["signature"]["seed"]
        if mode not in found:
            continue
        if info.get("status") == "done" and metrics.is_file():
            found[mode][seed] = json.loads(metrics.read_text())
        elif partial and (record.parent / "checkpoints" / "latest.pt").is_file():
            import torch

            payload = torch.load(record.parent / "checkpoints" / "latest.pt", map_location="cpu", weights_only=False)
            found[mode][seed] = {"psnr": None, "ssim": None, "steps": payload["step"], "unfinished": True,
                                 "history": payload["extra"].get("history", [])}
    return found


def control_contrasts(folder: Path, row: dict) -> dict:
    """The learning-rate-matched control: for every mode of the finished runs under ``folder``/runs
    (e.g. ``none*2``: vanilla at twice the rates), the paired per-seed ``row - mode`` of the final
    held-out PSNR, with the mode's own PSNR per seed. ``row``: {seed: metrics} of the setting's row cell."""
    runs: dict = {}
    for record in sorted((folder / "runs").glob("*/compare_run.json")):
        info = json.loads(record.read_text())
        metrics = record.parent / "metrics.json"
        if info.get("status") == "done" and metrics.is_file():
            runs.setdefault(info["signature"]["mode"], {})[info["signature"]["seed"]] = json.loads(metrics.read_text())
    out = {}
    for mode, found in runs.items():
        seeds = sorted(s for s in set(found) & set(row) if row[s]["psnr"] is not None)
        out[mode] = {"of": f"row - {mode}", "seeds": seeds, "folder": str(folder),
                     "psnr_per_seed": {str(s): found[s]["psnr"] for s in sorted(found)},
                     **paired([row[s]["psnr"] - found[s]["psnr"] for s in seeds])}
    return out


def add_from_record(found: dict, record_file: Path, name: str) -> dict:
    """Fill the empty ``none`` / ``row`` cells from ``record_file``'s ``name.runs``; returns {mode: source}."""
    runs = json.loads(record_file.read_text())[name]["runs"]
    sources = {}
    for mode in ("none", "row"):
        if found[mode]:
            continue
        for run_name, metrics in runs.items():
            _, run_mode, seed = run_name.rsplit("-", 2)
            if run_mode == mode:
                found[mode][int(seed[1:])] = metrics
                sources[mode] = f"{record_file}: {name}.runs"
    return sources


def cell_summary(runs: dict) -> dict:
    if not runs:
        return {"n_seeds": 0}
    steps = sorted({h["step"] for m in runs.values() for h in m.get("history", []) if "train_psnr" in h})
    curve = []
    for step in steps:
        rows = [h for m in runs.values() for h in m["history"] if h["step"] == step]
        train = [h["train_psnr"] for h in rows if h.get("train_psnr") is not None]
        held = [h["psnr"] for h in rows if h.get("psnr") is not None]
        if len(rows) == len(runs):  # only steps every run of the cell reached
            curve.append({"step": step, "train_psnr_mean": float(np.mean(train)), "psnr_mean": float(np.mean(held)),
                          "n": len(rows)})
    first = next(iter(runs.values()))
    finals = [m["psnr"] for m in runs.values() if m["psnr"] is not None]
    return {"n_seeds": len(runs), "psnr_per_seed": {str(s): m["psnr"] for s, m in sorted(runs.items())},
            "psnr_mean": float(np.mean(finals)) if len(finals) == len(runs) else None,
            "unfinished_at_step": {str(s): m["steps"] for s, m in sorted(runs.items()) if m.get("unfinished")},
            "ssim_per_seed": {str(s): m["ssim"] for s, m in sorted(runs.items())},
            "ssim_window": first.get("ssim_window", "uniform 7x7, sample covariance"),
            "steps": sorted({m["steps"] for m in runs.values()}), "curve": curve}


def summarize(found: dict) -> dict:
    contrasts = {}
    for name, (a, b) in CONTRASTS.items():
        seeds = sorted(s for s in set(found[a]) & set(found[b])
                       if found[a][s]["psnr"] is not None and found[b][s]["psnr"] is not None)
        contrasts[name] = {"of": f"{a} - {b}", "seeds": seeds,
                           **paired([found[a][s]["psnr"] - found[b][s]["psnr"] for s in seeds])}
    return {"cells": {mode: cell_summary(runs) for mode, runs in found.items()}, "contrasts_psnr_db": contrasts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", nargs="+", required=True, help="NAME=compare output folder")
    parser.add_argument("--command", nargs="*", default=[], help="NAME=the enerf compare command that made it")
    parser.add_argument("--from_record", nargs="*", default=[], help="NAME=earlier record with its none / row runs")
    parser.add_argument("--control", nargs="*", default=[],
                        help="NAME=FOLDER: enerf compare runs (e.g. --modes 'none*2') set against that setting's row cell")
    parser.add_argument("--plot", default="", help="NAME=PNG: the four cells' curves of that setting (seeds in all cells)")
    parser.add_argument("--partial", action="store_true",
                        help="also read unfinished runs (their periodic evaluations so far, from the last checkpoint)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "conditioning_2x2.json"))
    args = parser.parse_args(argv)
    commands = dict(item.split("=", 1) for item in args.command)
    earlier = dict(item.split("=", 1) for item in args.from_record)
    controls = dict(item.split("=", 1) for item in args.control)
    out_path = Path(args.out)
    record = json.loads(out_path.read_text()) if out_path.is_file() else {}
    record["what"] = ("2 x 2: conditioning {none, row} x applied weights at step 0 {vanilla, equilibrated} "
                      "(--init_weights), final held-out PSNR at equal steps; paired per-seed differences with "
                      "95 % Student-t intervals; curves of training-batch and periodic held-out PSNR (means over "
                      "seeds)")
    for item in args.setting:
        name, folder = item.split("=", 1)
        found = read_setting(Path(folder), args.partial)
        sources = {m: folder for m, runs in found.items() if runs}
        if name in earlier:
            sources.update(add_from_record(found, Path(earlier[name]), name))
        common = set.intersection(*[set(runs) for runs in found.values()]) if all(found.values()) else set()
        record[name] = {"command": commands.get(name, ""), "folder": folder, "cell_sources": sources,
                        "load_1min_at_record": load_average()[0], **summarize(found),
                        "common_seeds": sorted(common),
                        "cells_common_seeds": {m: cell_summary({s: r[s] for s in common}) for m, r in found.items()}}
        if name in controls:
            record[name]["lr_control"] = control_contrasts(Path(controls[name]), found["row"])
            for mode, c in record[name]["lr_control"].items():
                ci = c.get("ci95")
                print(f"{name} control {c['of']} (seeds {c['seeds']}): {c['mean']:+.2f} dB"
                      + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else ""))
        for cname, c in record[name]["contrasts_psnr_db"].items():
            ci = c.get("ci95")
            text = f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "(fewer than two seeds: no interval)"
            mean = "n/a" if c["mean"] is None else f"{c['mean']:+.2f} dB"
            print(f"{name} {cname} ({c['of']}, seeds {c['seeds']}): {mean} {text}")
    write_record(out_path, record)
    if args.plot:
        name, png = args.plot.split("=", 1)
        plot_cells(record[name], Path(png), name)
    return 0


def plot_cells(setting: dict, png: Path, name: str) -> None:
    """Training-batch and periodic held-out PSNR against step, one line per cell (means over the
    seeds that every cell has)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    steps_common = None
    for cell in setting["cells_common_seeds"].values():
        steps = {c["step"] for c in cell.get("curve", [])}
        steps_common = steps if steps_common is None else steps_common & steps
    styles = {"none": ("tab:blue", "-"), "none~equilibrated": ("tab:blue", "--"),
              "row": ("tab:red", "-"), "row~vanilla": ("tab:red", "--")}
    for mode, cell in setting["cells_common_seeds"].items():
        if not cell.get("curve"):
            continue
        colour, line = styles[mode]
        curve = [c for c in cell["curve"] if c["step"] in steps_common]
        steps = [c["step"] for c in curve]
        label = f"{mode} ({cell['n_seeds']} seed{'s' if cell['n_seeds'] > 1 else ''})"
        axes[0].plot(steps, [c["train_psnr_mean"] for c in curve], line, color=colour, marker="o", label=label)
        axes[1].plot(steps, [c["psnr_mean"] for c in curve], line, color=colour, marker="o", label=label)
    axes[0].set_title(f"{name}: training-batch PSNR")
    axes[1].set_title(f"{name}: held-out PSNR (periodic: first view; last: all)")
    for ax in axes:
        ax.set_xlabel("step")
        ax.set_ylabel("PSNR (dB)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    tmp = png.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(png)


if __name__ == "__main__":
    raise SystemExit(main())
