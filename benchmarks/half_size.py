"""A run's field and its splats scored at 1/N of the training size (a smaller window than they were fitted at).

For each held-out view: the photo's N x N blocks averaged (what a camera of 1/N the resolution sees), the
field rendered at 1/N (``field_source``: one ray through each pixel centre of the smaller image) and the
splats drawn at 1/N (``splat_source``, the same rasterizer as ``enerf eval --splats``); PSNR of each.

    python -m benchmarks.half_size --ckpt runs/capture_splats/fox/checkpoints/latest.pt \\
        --record benchmarks/capture_splats.json --name fox
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from benchmarks.harness import git_commit, load_average, write_record
from enerf.config import DATA_ROOT
from enerf.loaded_run import load_run
from enerf.metrics import psnr
from enerf.cameras.pinhole import Pinhole
from enerf.render.sources import field_source
from enerf.runfolder import run_splats_path
from enerf.splats.files import read_splats_into_scene
from enerf.splats.source import run_background, splat_source


def block_mean(image: np.ndarray, n: int) -> np.ndarray:
    """[H, W, 3] -> [H // n, W // n, 3]: the means of n x n blocks."""
    h, w = image.shape[0] // n, image.shape[1] // n
    return image[:h * n, :w * n].reshape(h, n, w, n, -1).mean((1, 3))


def score(ckpt: str, downscale: int, datadir: str | None = None, splats: Path | None = None, field: bool = True,
          draw_classic: bool = False) -> dict:
    """Per held-out view, the field's (unless not ``field``) and the splats' PSNR at 1 / ``downscale`` of the
    training size; ``splats``: a splat file in the run's frame (default: the run's splats.ply); ``draw_classic``:
    drawn without the 2D mip filter even where the file has it (as a viewer without it draws them)."""
    run = load_run(ckpt, DATA_ROOT, task="nerf", datadir=datadir, images=True)
    path = splats or run_splats_path(run.folder)
    if path is None:
        raise SystemExit(f"{run.folder} has no splats.ply")
    scene = run.scene
    gaussians = read_splats_into_scene(path, scene, run.device)[0]
    gaussians.antialiased = gaussians.antialiased and not draw_classic
    sources = {"splats": splat_source(gaussians, scene, run_background(run.cfg.render))}
    if field:
        sources["field"] = field_source(scene, run.fields, run.cfg.render, run.device, run.renderer)
    views = []
    for index in scene.i_test:
        target = block_mean(scene.image(int(index)), downscale)
        view = Pinhole(np.asarray(scene.poses[int(index)], np.float32), target.shape[1], target.shape[0],
                           float(scene.focal) / downscale)
        with torch.no_grad():
            scores = {name: psnr(src(view)["rgb"].clamp(0, 1).numpy(), target) for name, src in sources.items()}
        views.append({"view": int(index), **scores})
        print(f"view {int(index)}: " + ", ".join(f"{k} {v:.2f} dB" for k, v in scores.items()), flush=True)
    return {"downscale": downscale, "views": views,
            **{name: float(np.mean([v[name] for v in views])) for name in sources}}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--datadir", default=None)
    parser.add_argument("--downscale", type=int, default=2)
    parser.add_argument("--record", default=None, help="a benchmarks.capture_splats record: the entry gets 'half_size'")
    parser.add_argument("--name", default=None, help="the record's entry")
    args = parser.parse_args(argv)
    load = load_average()
    result = {**score(args.ckpt, args.downscale, args.datadir), "load_before": load}
    print(f"at 1/{args.downscale}: field {result['field']:.2f} dB, splats {result['splats']:.2f} dB")
    if args.record:
        path = Path(args.record)
        record = json.loads(path.read_text())
        record["entries"][args.name]["half_size"] = {**result, "commit": git_commit()}
        write_record(path, record)
    return result


if __name__ == "__main__":
    main()
