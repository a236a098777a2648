"""A run's splats in the other layouts: each file's size against the PLY's, and its held-out PSNR against the PLY's.

For a run that ended in splats (``<run>/splats.ply``), as a user types them (subprocesses of ``python -m enerf``):
``enerf export splats --splats <run>/splats.ply --out OUT/NAME.EXT`` for EXT in spz, splat, then
``enerf eval --ckpt C --splats FILE`` for the PLY and each of them (``<run>/metrics_splats.json``, read after
each). The entry goes into the record under ``entries.NAME`` (the others kept).

    python -m benchmarks.splat_files --name fox --record benchmarks/splat_files.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import TRAINING_CODE, git_commit, load_average, machine, write_record

FORMATS = ("spz", "splat")
# what the record's figures depend on (benchmarks/pages): the writers and readers, the rasterizer, the scoring
DEPENDS = TRAINING_CODE + [f"enerf/splats/{name}" for name in (
    "spz.py", "dotsplat.py", "ply.py", "files.py", "frames.py", "gaussians.py", "projection.py", "rasterize.py",
    "tiles.py", "source.py", "export.py", "clean.py")] + ["enerf/loaded_run.py", "enerf/cli"]


def enerf(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "enerf", *args, "--quiet"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"enerf {' '.join(args)} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")


def measure(run: Path, out: Path, name: str) -> dict:
    """Sizes and held-out PSNRs of the run's PLY and of its copies in ``FORMATS``."""
    ckpt = str(run / "checkpoints" / "latest.pt")
    files = {"ply": run / "splats.ply"}
    for ext in FORMATS:
        files[ext] = out / f"{name}.{ext}"
        enerf("export", "splats", "--splats", str(files["ply"]), "--out", str(files[ext]))
    result = {}
    for ext in (*FORMATS, "ply"):  # the PLY last: the run's metrics_splats.json ends as training left it
        path = files[ext]
        enerf("eval", "--ckpt", ckpt, "--splats", str(path))
        scored = json.loads((run / "metrics_splats.json").read_text())
        result[ext] = {"bytes": path.stat().st_size, "psnr": scored["psnr"], "count": scored.get("splat_count")}
    for ext in FORMATS:
        result[ext]["size_ratio"] = result[ext]["bytes"] / result["ply"]["bytes"]
        result[ext]["delta_psnr"] = result[ext]["psnr"] - result["ply"]["psnr"]
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="the record's entry (and the run's name)")
    parser.add_argument("--basedir", default="runs/capture_splats")
    parser.add_argument("--out", default="runs/splat_files")
    parser.add_argument("--record", default=None)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load = load_average()
    result = {**measure(Path(args.basedir) / args.name, out, args.name), "load_before": load, "commit": git_commit()}
    for ext in FORMATS:
        r = result[ext]
        print(f"{args.name} .{ext}: {r['bytes'] / 2**20:.1f} MB ({r['size_ratio']:.3f} of the PLY), "
              f"{r['psnr']:.2f} dB ({r['delta_psnr']:+.3f} dB against the PLY)")
    if args.record:
        path = Path(args.record)
        record = json.loads(path.read_text()) if path.is_file() else {"entries": {}}
        record.update(what="each run's splats.ply written as .spz and .splat: sizes and held-out PSNRs",
                      machine=machine(), commit=git_commit(), depends=DEPENDS)
        record["entries"][args.name] = result
        write_record(path, record)
    return result


if __name__ == "__main__":
    main()
