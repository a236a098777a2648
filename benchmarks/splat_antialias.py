"""The 2D mip filter (``enerf export splats --antialiased``) against classic splats, baked from one checkpoint.

For each capture's trained run (a ``benchmarks.capture_splats`` run folder): the bake with the default
options, once ``--antialiased false`` (classic 3DGS) and once ``--antialiased true`` (each ``python -m enerf
export splats``, a fresh process, ``bake_seconds`` of wall time), then both scored on the held-out views at the training size and at 1/2
of it (``benchmarks.half_size.score``: the photo's 2 x 2 blocks averaged); the field at 1/2 beside them
(the field at the training size: the run's own metrics.json). ``--drawn_classic`` then scores each run's
antialiased file as a viewer without the filter draws it (3DGS's own rasterizer, most PLY viewers), into the
same record.

    python -m benchmarks.splat_antialias --runs runs/capture_splats --names fox boardgame \\
        --record benchmarks/splat_antialias.json
    python -m benchmarks.splat_antialias --runs runs/capture_splats --names fox boardgame \\
        --record benchmarks/splat_antialias.json --drawn_classic
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.half_size import score
from benchmarks.harness import git_commit, load_average, machine, write_record

DEPENDS = ["enerf/splats/bake.py", "enerf/splats/rasterize.py", "enerf/splats/projection.py", "enerf/splats/tiles.py",
           "enerf/splats/teacher.py", "enerf/splats/gaussians.py", "enerf/splats/ply.py", "benchmarks/half_size.py"]
VARIANTS = {"classic": ["--antialiased", "false"], "antialiased": ["--antialiased", "true"]}  # whatever the default


def bake(ckpt: Path, out: Path, flags: list[str]) -> float:
    """``enerf export splats`` of ``ckpt`` into ``out``; its wall seconds."""
    tic = time.perf_counter()
    cmd = [sys.executable, "-m", "enerf", "export", "splats", "--ckpt", str(ckpt), "--out", str(out),
           "--frame", "scene", *flags]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"enerf export splats failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return time.perf_counter() - tic


def measure(folder: Path) -> dict:
    """Both variants of one run: bake seconds, PSNR at 1 and 1/2 (per view), the field at 1 and 1/2."""
    ckpt = folder / "checkpoints" / "latest.pt"
    metrics = json.loads((folder / "metrics.json").read_text())
    entry = {"field": metrics["psnr"], "variants": {}}
    for name, flags in VARIANTS.items():
        out = folder / f"ab_{name}.ply"
        load = load_average()
        seconds = bake(ckpt, out, flags)
        full = score(str(ckpt), 1, splats=out, field=False)
        half = score(str(ckpt), 2, splats=out, field="field_half" not in entry)
        if "field_half" not in entry:
            entry["field_half"] = half.pop("field")
            entry["field_half_views"] = [{"view": v["view"], "field": v.pop("field")} for v in half["views"]]
        entry["variants"][name] = {"bake_wall_s": seconds, "load_before": load, "psnr": full["splats"],
                                   "psnr_half": half["splats"], "views": full["views"], "views_half": half["views"]}
        print(f"{folder.name} {name}: {full['splats']:.2f} dB, at 1/2 {half['splats']:.2f} dB "
              f"(field {entry['field']:.2f} / {entry['field_half']:.2f})", flush=True)
    return entry


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="runs/capture_splats")
    parser.add_argument("--names", nargs="+", default=["fox", "boardgame"])
    parser.add_argument("--record", default=None)
    parser.add_argument("--drawn_classic", action="store_true", help="score the antialiased files drawn classic, into "
                        "--record's entries")
    args = parser.parse_args(argv)
    if args.drawn_classic:
        record = json.loads(Path(args.record).read_text())
        for name in args.names:
            folder = Path(args.runs) / name
            full = score(str(folder / "checkpoints" / "latest.pt"), 1, splats=folder / "ab_antialiased.ply",
                         field=False, draw_classic=True)
            record["entries"][name]["variants"]["antialiased"]["drawn_classic"] = {"psnr": full["splats"],
                                                                                   "views": full["views"]}
            print(f"{name} antialiased, drawn classic: {full['splats']:.2f} dB", flush=True)
        record["command_drawn_classic"] = "python -m benchmarks.splat_antialias " + " ".join(
            argv if argv is not None else sys.argv[1:])
        write_record(Path(args.record), record)
        return record
    record = {"what": "splats baked from one checkpoint, classic vs --antialiased (2D mip filter): held-out PSNR at "
                      "the training size and at 1/2 of it", "command": "python -m benchmarks.splat_antialias "
                      + " ".join(argv if argv is not None else sys.argv[1:]),
              "commit": git_commit(), "depends": DEPENDS, "machine": machine(),
              "entries": {name: measure(Path(args.runs) / name) for name in args.names}}
    if args.record:
        write_record(Path(args.record), record)
    return record


if __name__ == "__main__":
    main()
