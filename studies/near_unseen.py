"""Would dropping the Gaussians no photo frames that lie close to a training camera clean a run's splats? (The
dark streak in the boardgame's held-out view 88: a few small Gaussians no training camera frames, 0.2-0.3 in front
of that view's camera, left by the bake's turned views.)

For a run that ended in splats: each held-out view's PSNR drawn as ``enerf eval --splats`` draws it
(``splat_source``), with the splats as they are and with the Gaussians ``near_unseen`` picks at each
``--quantiles`` dropped, beside the field's PSNR from the run's metrics.json; ``--baked_at`` names the commit
that baked the splats. The fit is held fixed: this is what such a step after the fit would do.

    python -m studies.near_unseen --ckpt runs/capture_splats/boardgame/checkpoints/latest.pt --name boardgame \\
        --baked_at a576234 --record benchmarks/near_unseen.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from benchmarks.harness import TRAINING_CODE, command_line, git_commit, load_average, run_with_splats, write_entry
from enerf.cameras.pinhole import Pinhole
from enerf.cameras.visibility import frustum_counts
from enerf.metrics import psnr
from enerf.splats.files import read_splats_into_scene
from enerf.splats.source import run_background, splat_source

DEPENDS = [*TRAINING_CODE, "enerf/splats", "studies/near_unseen.py"]


def near_unseen(means: Tensor, poses: Tensor, height: int, width: int, focal: float, quantile: float) -> Tensor:
    """The Gaussians whose centre no training camera frames and that lie nearer to a training camera centre than
    the ``quantile`` of the framed ones' distances to theirs.

    Args:
        means: Tensor  # [N, 3] the Gaussians' centres; poses: Tensor  # [V, 3, 4] the training cameras
        height, width, focal: the training cameras' pinhole (pixels); quantile: in (0, 1)
    Returns:
        Tensor  # [N] bool
    """
    unseen = frustum_counts(means, poses, height, width, focal) == 0
    if bool(unseen.all()) or not bool(unseen.any()):
        return torch.zeros_like(unseen)
    nearest = torch.cdist(means.float(), poses[:, :3, 3].to(means.device, torch.float32)).min(1).values  # [N]
    return unseen & (nearest < torch.quantile(nearest[~unseen], quantile))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--datadir", default=None)
    parser.add_argument("--quantiles", type=float, nargs="+", default=[0.01, 0.05])
    parser.add_argument("--baked_at", default=None, help="the commit that baked the run's splats")
    parser.add_argument("--name", required=True, help="the entry's name in --record")
    parser.add_argument("--record", type=Path)
    args = parser.parse_args(argv)
    load_before = load_average()
    run, path = run_with_splats(args.ckpt, args.datadir)
    scene = run.scene
    gaussians = read_splats_into_scene(path, scene, run.device)[0]
    poses = torch.as_tensor(np.asarray(scene.poses, np.float32)[np.asarray(scene.i_train)][:, :3, :4])
    dropped = {f"{q:g}": near_unseen(gaussians.means, poses, scene.height, scene.width, scene.focal, q)
               for q in args.quantiles}
    variants = {"as_is": gaussians, **{q: gaussians.select(~d) for q, d in dropped.items()}}
    sources = {k: splat_source(g, scene, run_background(run.cfg.render)) for k, g in variants.items()}
    field = {int(v["view"]): v["psnr"] for v in json.loads((run.folder / "metrics.json").read_text())["per_image"]}
    views = []
    for index in scene.i_test:
        photo = scene.image(int(index))
        cam = Pinhole(np.asarray(scene.poses[int(index)], np.float32), photo.shape[1], photo.shape[0],
                      float(scene.focal))
        with torch.no_grad():
            row = {k: psnr(src(cam)["rgb"].clamp(0, 1).numpy(), photo) for k, src in sources.items()}
        views.append({"view": int(index), "field": field.get(int(index)), **row})
        print(f"view {int(index)}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items() if v is not None), flush=True)
    mean = {k: float(np.mean([v[k] for v in views])) for k in variants}
    print("mean: " + ", ".join(f"{k} {v:.3f}" for k, v in mean.items()))
    entry = {"checkpoint": args.ckpt, "splats": str(path), "baked_at": args.baked_at, "count": len(gaussians),
             "dropped": {q: int(d.sum()) for q, d in dropped.items()}, "mean": mean, "views": views,
             "command": command_line(), "commit": git_commit(), "load_before": load_before,
             "load_after": load_average()}
    if args.record:
        write_entry(args.record, args.name, entry, "the splats' held-out PSNR with and without the Gaussians "
                    "near_unseen picks (studies/near_unseen.py's docstring)", DEPENDS)
    return entry


if __name__ == "__main__":
    main()
