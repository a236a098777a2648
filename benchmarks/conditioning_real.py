"""Vanilla vs E-NeRF on fern and lego with the CPU configs (the README's row, docs/conditioning.md):
``benchmarks/conditioning_real.json`` from the folders of docs/conditioning.md's two ``enerf compare``
commands (their compare.csv and each run's metrics.json).

    enerf compare --scenes fern --modes none row --seeds 0 1 2 --config fern=configs/fern_cpu.txt \\
        --jobs 2 --out runs/compare_fern1500 -- --iters 1500 --time_budget 0 --eval_every 500 \\
        --eval_views 1 --kappa_every 500 --no_lpips                                # about 25 minutes
    enerf compare --scenes lego --modes none row col --seeds 0 1 2 --config lego=configs/lego_cpu.txt \\
        --jobs 2 --out runs/compare_lego -- --iters 300 --time_budget 0 --eval_every 150 --eval_views 1 \\
        --kappa_every 100 --testskip 25 --no_lpips                                 # about 25 minutes
    python -m benchmarks.conditioning_real --load fern="1.93 1.99 2.00" --load lego="1.66 1.94 1.97"

``--load SCENE=TEXT``: the load averages the compare started under (the figures are PSNR and SSIM at
fixed step counts, which load does not change; the runs' training seconds are kept beside them). An
older record made at another commit moves under ``previous``.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from benchmarks.harness import ROOT, TRAINING_CODE, git_commit, keep_previous, machine, write_record

RECORD = ROOT / "benchmarks" / "conditioning_real.json"
# what the figures depend on (benchmarks/pages: a later commit to these makes the record stale)
DEPENDS = TRAINING_CODE + ["enerf/compare", "configs/fern_cpu.txt", "configs/lego_cpu.txt"]
WHAT = ("vanilla (none) vs row (and col on lego), seeds 0-2, fixed step counts, one thread per run; fern: "
        "configs/fern_cpu.txt for 1,500 steps; lego: configs/lego_cpu.txt for 300 steps; mean ± sample std over "
        "seeds, Δ vs none with its paired 95 % t interval (compare.md of enerf compare)")
SSIM = "SSIM with an 11 x 11 Gaussian window, sigma 1.5 (enerf.metrics; the runs' metrics.json ssim_window)"
COMMANDS = {
    "fern": "enerf compare --scenes fern --modes none row --seeds 0 1 2 --config fern=configs/fern_cpu.txt --jobs 2 "
            "--out runs/compare_fern1500 -- --iters 1500 --time_budget 0 --eval_every 500 --eval_views 1 "
            "--kappa_every 500 --no_lpips",
    "lego": "enerf compare --scenes lego --modes none row col --seeds 0 1 2 --config lego=configs/lego_cpu.txt --jobs 2 "
            "--out runs/compare_lego -- --iters 300 --time_budget 0 --eval_every 150 --eval_views 1 --kappa_every 100 "
            "--testskip 25 --no_lpips",
}
COMMAND = "the two enerf compare commands (fern, lego), then python -m benchmarks.conditioning_real --load SCENE=..."


def _out(command: str) -> str:
    words = command.split()
    return words[words.index("--out") + 1]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(";")]


def mode_rows(folder: Path, scene: str) -> list[dict]:
    """One entry per mode of SCENE in a compare folder, as the record keeps it: per-seed PSNR (rounded
    and not), mean ± std, SSIM mean ± std, steps and training seconds per seed; Δ vs none with its 95 %
    interval for the other modes (unrounded beside the rounded ones the pages print)."""
    path = folder / "compare.csv"
    if not path.is_file():
        raise SystemExit(f"conditioning_real: {path} not found; run the compare first ({COMMANDS.get(scene, '')})")
    with open(path, newline="") as f:
        table = [r for r in csv.DictReader(f) if r["scene"] == scene]
    if not table:
        raise SystemExit(f"conditioning_real: {path} has no rows for scene {scene!r}")
    out = []
    for r in table:
        psnr = _floats(r["psnr_per_seed"])
        paths = [folder / "runs" / f"{scene}-{r['mode']}-s{seed}" / "metrics.json" for seed in range(len(psnr))]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise SystemExit(f"conditioning_real: {missing[0]} not found; rerun the compare ({COMMANDS.get(scene, '')}) "
                             "to finish its runs")
        runs = [json.loads(p.read_text()) for p in paths]
        row = {"mode": r["mode"], "psnr": [round(p, 2) for p in psnr], "psnr_unrounded": psnr,
               "psnr_mean": round(float(r["psnr_mean"]), 2), "psnr_std": round(float(r["psnr_std"]), 2),
               "ssim_mean": round(float(r["ssim_mean"]), 4), "ssim_std": round(float(r["ssim_std"]), 4),
               "steps": [m["steps"] for m in runs], "train_seconds": [round(m["train_seconds"], 1) for m in runs]}
        if r["psnr_delta_vs_none"]:
            ci = [float(r["psnr_delta_ci95_low"]), float(r["psnr_delta_ci95_high"])]
            row.update(psnr_delta=float(r["psnr_delta_vs_none"]), psnr_delta_ci95=[round(x, 2) for x in ci],
                       psnr_delta_ci95_unrounded=ci, ssim_delta=round(float(r["ssim_delta_vs_none"]), 4),
                       ssim_delta_ci95=[round(float(r["ssim_delta_ci95_low"]), 4),
                                        round(float(r["ssim_delta_ci95_high"]), 4)])
        out.append(row)
    return out


def summary(parts: dict[str, dict]) -> dict:
    """The README's row: Δ and its 95 % interval of row on fern and on lego, and of col on lego (unrounded)."""
    out = {}
    for scene, mode, prefix in (("fern", "row", "fern_row"), ("lego", "row", "lego_row"), ("lego", "col", "lego_col")):
        row = next((r for r in parts.get(scene, {}).get("rows", []) if r["mode"] == mode), None)
        if row is None:
            continue
        ci_prefix = prefix if mode == "col" else scene  # fern_ci_low, lego_ci_low, lego_col_ci_low
        out.update({f"{prefix}_delta": row["psnr_delta"], f"{ci_prefix}_ci_low": row["psnr_delta_ci95_unrounded"][0],
                    f"{ci_prefix}_ci_high": row["psnr_delta_ci95_unrounded"][1]})
    return out


def collect(folders: dict[str, Path], loads: dict[str, str], record_path: Path | str = RECORD) -> dict:
    """The record of the compares in ``folders`` (scene -> compare folder)."""
    parts = {scene: {"command": COMMANDS[scene], "rows": mode_rows(Path(folder), scene),
                     **({"load": loads[scene]} if scene in loads else {})} for scene, folder in folders.items()}
    record = {"commit": git_commit(), "depends": DEPENDS, "what": WHAT, "command": COMMAND,
              "machine": machine() + "; two runs at a time, one thread each", "summary": summary(parts),
              **parts, "ssim": SSIM}
    write_record(record_path, keep_previous(record, record_path))
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for scene, command in COMMANDS.items():
        parser.add_argument(f"--{scene}", default=str(ROOT / _out(command)), help=f"the {scene} compare's folder")
    parser.add_argument("--load", action="append", default=[], metavar="SCENE=TEXT",
                        help="the load averages a compare started under, written beside its rows")
    parser.add_argument("--record", default=str(RECORD))
    args = parser.parse_args(argv)
    loads = {}
    for spec in args.load:
        scene, sep, text = spec.partition("=")
        if not sep or scene not in COMMANDS:
            parser.error(f"--load {spec!r} is not SCENE=TEXT with SCENE one of {', '.join(COMMANDS)}")
        loads[scene] = text
    record = collect({scene: Path(getattr(args, scene)) for scene in COMMANDS}, loads, args.record)
    print(json.dumps(record["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
