"""How wide a run's splats are against their distance from the training cameras, and which splats cover one view most.

For a run with splats.ply: the ratio of each Gaussian's largest standard deviation to its distance from the nearest
training camera (quantiles; how many exceed 0.5 and 1), the cameras' extent (1.1 x the largest distance of a training
camera from their mean), and for held-out view ``--view`` its PSNR drawn by both backends (numba and pure torch) and
the Gaussians drawn into it with the largest footprint x opacity.

    python -m studies.splat_spread --ckpt runs/capture_splats/boardgame/checkpoints/latest.pt --view 88 \\
        --out benchmarks/splat_spread.json
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from benchmarks.harness import command_line, git_commit, run_with_splats, write_record
from enerf.cameras.pinhole import Pinhole
from enerf.metrics import psnr
from enerf.splats.bake import _camera_extent, _spread_cap
from enerf.splats.files import read_splats_into_scene
from enerf.splats.rasterize import project, rasterize


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--datadir", default=None)
    parser.add_argument("--view", type=int, required=True, help="a held-out view's index")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    run, path = run_with_splats(args.ckpt, args.datadir)
    scene = run.scene
    g = read_splats_into_scene(path, scene, run.device)[0]
    train_centres = np.asarray(scene.poses)[np.asarray(scene.i_train)][:, :3, 3]  # [V, 3]
    centres = torch.as_tensor(train_centres, dtype=torch.float32)
    nearest = _spread_cap(g.means, centres, 1.0).exp()  # [N] distance to the nearest training camera, as the fit's cap
    ratio = g.scales.max(1).values / nearest
    photo = scene.image(args.view)
    cam = Pinhole(np.asarray(scene.poses[args.view], np.float32), photo.shape[1], photo.shape[0], float(scene.focal))
    with torch.no_grad():
        drawn = {b: rasterize(g, cam, torch.zeros(3), backend=b) for b in ("numba", "torch")}
        p = project(g, cam)
    idx = drawn["numba"]["index"]
    area = (p["cov2d"][:, 0] * p["cov2d"][:, 2]).sqrt()
    top = idx[torch.argsort(area[idx] * g.opacities[idx], descending=True)[:args.top]]
    result = {
        "command": command_line(), "commit": git_commit(), "splats": len(g),
        "camera_extent": _camera_extent(train_centres),
        "ratio_quantiles": dict(zip(["0.5", "0.9", "0.99", "0.999"],
                                    torch.quantile(ratio, torch.tensor([0.5, 0.9, 0.99, 0.999])).tolist())),
        "ratio_above": {"0.5": int((ratio > 0.5).sum()), "1": int((ratio > 1).sum())},
        "view": args.view,
        "psnr": {b: psnr(o["rgb"].clamp(0, 1).numpy(), photo) for b, o in drawn.items()},
        "largest_drawn": [{"opacity": float(g.opacities[k]), "largest_sd": float(g.scales[k].max()),
                           "nearest_camera": float(nearest[k]), "uv": p["uv"][k].tolist()} for k in top.tolist()],
    }
    print(json.dumps(result, indent=1))
    if args.out:
        write_record(args.out, result)
    return result


if __name__ == "__main__":
    main()
