"""Crop and the floater filter of ``enerf export splats`` on a run's splats: how many Gaussians each removes and
what it costs on the held-out views.

    python -m benchmarks.splat_clean --names fox boardgame beer --record benchmarks/splat_clean.json

For each run (``RUNS/NAME/splats.ply`` and its checkpoint), as a user types them (subprocesses of
``python -m enerf``): ``enerf export splats --ckpt C --splats PLY --out OUT --min_contribution P`` (the
Gaussians whose blending weight, summed over a training view's pixels, stays under P in all of them) and
``--crop cx cy cz r``, a sphere about the centres' median holding ``--keep`` % of them (99.9: the farthest 0.1 %
cut); then
``enerf eval --ckpt C --splats FILE`` of the PLY and of the filtered file, read from ``<run>/metrics_splats.json``.
The crop is scored where it keeps the scene: on each held-out view (at the run's evaluation stride), the pixels
the PLY covers (accumulated opacity > 0.5) whose expected depth point lies inside the sphere, the PLY's and the
cropped file's renders against the photo there (``inside_share``: that share of the view's pixels). Target
(issue 64): each within 0.1 dB of the PLY's held-out PSNR on what the crop keeps.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.harness import TRAINING_CODE, command_line, git_commit, load_average, machine, write_record
from benchmarks.splat_files import enerf

DEPENDS = TRAINING_CODE + [f"enerf/splats/{name}" for name in (
    "clean.py", "export.py", "files.py", "frames.py", "gaussians.py", "ply.py", "projection.py", "rasterize.py",
    "tiles.py", "source.py")] + ["enerf/loaded_run.py", "enerf/cli"]


def _score(ckpt: Path, splats: Path, run: Path) -> dict:
    enerf("eval", "--ckpt", str(ckpt), "--splats", str(splats))
    return json.loads((run / "metrics_splats.json").read_text())


def _export(*args: str) -> dict:
    """``enerf export splats ARGS`` (printed line kept): the count written and the counts removed."""
    done = subprocess.run([sys.executable, "-m", "enerf", "export", "splats", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"enerf export splats failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    line = done.stdout.strip().splitlines()[-1]
    return {"printed": line, "written": int(re.search(r"wrote ([\d,]+) splats", line)[1].replace(",", ""))}


def _inside_crop(ckpt: Path, ply: Path, cropped: Path, centre: np.ndarray, radius: float) -> dict:
    """Held-out PSNR of the PLY and of the cropped file where the crop keeps the scene (module docstring)."""
    import torch

    from enerf.cameras.rays import pixel_rays
    from enerf.config import DATA_ROOT
    from enerf.data.output_frame import OutputFrame
    from enerf.loaded_run import load_run
    from enerf.cameras.pinhole import Pinhole
    from enerf.splats.rasterize import rasterize
    from enerf.splats.files import read_splats_into_scene

    run = load_run(ckpt, DATA_ROOT, images=True)
    scene, stride = run.scene, run.cfg.train.eval_stride
    to_world = OutputFrame(scene, "world")
    both = [read_splats_into_scene(path, scene, run.device)[0] for path in (ply, cropped)]
    views = []
    for i in scene.i_test:
        c2w = torch.as_tensor(np.asarray(scene.poses[int(i)])[:3, :4], dtype=torch.float32)
        camera = Pinhole(c2w, int(scene.width), int(scene.height), float(scene.focal))
        with torch.no_grad():  # depth: camera z weighted by opacity; every stride-th row and column
            drawn = [rasterize(splats, camera) for splats in both]
        full, crop = ({k: out[k][::stride, ::stride] for k in ("rgb", "acc", "depth")} for out in drawn)
        origins, directions = pixel_rays(camera.height, camera.width, camera.focal, c2w)
        depth = (full["depth"] / full["acc"].clamp_min(1e-6))[..., None]
        points = (origins[::stride, ::stride] + depth * directions[::stride, ::stride]).double().numpy()
        keep = (full["acc"].numpy() > 0.5) & (np.linalg.norm(to_world.points(points) - centre, axis=-1) <= radius)
        photo = scene.image(int(i), stride)
        psnr = [float(-10 * np.log10(np.mean((r["rgb"].clamp(0, 1).numpy() - photo)[keep] ** 2))) for r in (full, crop)]
        views.append({"view": int(i), "inside_share": float(keep.mean()), "ply_psnr": psnr[0], "crop_psnr": psnr[1]})
    delta = [v["crop_psnr"] - v["ply_psnr"] for v in views]
    return {"views": len(views), "per_view": views, "delta_psnr": float(np.mean(delta)),
            "worst_view_delta": float(min(delta)),
            "inside_share_min": min(v["inside_share"] for v in views)}


def measure(run: Path, out: Path, name: str, min_contribution: float, keep: float) -> dict:
    from enerf.splats.files import read_splat_file

    ckpt, ply = run / "checkpoints" / "latest.pt", run / "splats.ply"
    splats, _ = read_splat_file(ply)
    means = splats.means.double().numpy()
    centre = np.median(means, 0)
    radius = float(np.percentile(np.linalg.norm(means - centre, axis=1), keep))
    ply_scores = _score(ckpt, ply, run)
    files = {"floaters": out / f"{name}_clean.ply", "crop": out / f"{name}_crop.ply"}
    result = {"splats": len(splats), "ply_psnr": ply_scores["psnr"], "crop_sphere": [*centre.tolist(), radius],
              "min_contribution": min_contribution, "keep_percent": keep}
    exported = {
        "floaters": _export("--ckpt", str(ckpt), "--splats", str(ply), "--out", str(files["floaters"]),
                            "--min_contribution", str(min_contribution), "--quiet"),
        "crop": _export("--splats", str(ply), "--out", str(files["crop"]), "--crop",
                        *(f"{v:.6g}" for v in (*centre, radius)), "--quiet")}
    scored = _score(ckpt, files["floaters"], run)
    delta = [p["psnr"] - q["psnr"] for p, q in zip(scored["per_image"], ply_scores["per_image"])]
    result["floaters"] = {**exported["floaters"], "removed": len(splats) - exported["floaters"]["written"],
                          "psnr": scored["psnr"], "delta_psnr": float(np.mean(delta)),
                          "worst_view_delta": float(min(delta))}
    result["crop"] = {**exported["crop"], "removed": len(splats) - exported["crop"]["written"],
                      **_inside_crop(ckpt, ply, files["crop"], centre, radius)}
    _score(ckpt, ply, run)  # the run's metrics_splats.json ends as training left it
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", nargs="+", default=["fox", "boardgame", "beer"])
    parser.add_argument("--basedir", default="runs/capture_splats")
    parser.add_argument("--out", default="runs/splat_clean")
    parser.add_argument("--min_contribution", type=float, default=0.5)
    parser.add_argument("--keep", type=float, default=99.9, help="the crop sphere holds this percentage of the centres")
    parser.add_argument("--record", default=None)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"what": __doc__.split("\n\n")[0], "command": command_line(), "machine": machine(), "commit": git_commit(),
              "depends": DEPENDS, "load_before": load_average(), "entries": {}}
    for name in args.names:
        r = record["entries"][name] = measure(Path(args.basedir) / name, out, name, args.min_contribution, args.keep)
        for kind in ("floaters", "crop"):
            k = r[kind]
            print(f"{name} {kind}: removed {k['removed']:,} of {r['splats']:,}; {k['delta_psnr']:+.3f} dB "
                  f"(worst view {k['worst_view_delta']:+.3f})", flush=True)
    record["load_after"] = load_average()
    if args.record:
        write_record(args.record, record)
    return record


if __name__ == "__main__":
    main()
