"""How much of each turned teacher view the field draws as a surface (``ViewDepth.spread``), per threshold: the probe
behind ``--turn_spread``'s default (benchmarks/README.md, "The field's turned views where it draws a surface").

    python -m studies.turn_spread --ckpt C --datadir D --name NAME [--out runs/turn_spread]

Renders every 4th of the bake's starting cameras turned 20 degrees up, down, left and right (1/``init_downscale`` of the
training size), prints the share of their pixels at least half opaque with spread <= 0.02 ... 0.5 and the spread's
quantiles, and writes ``OUT/NAME_turned.png``: the first eight views, then each with the pixels failing 0.05 / 0.1 / 0.2
tinted red.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import imageio.v3 as iio
import numpy as np

from enerf.config import SplatConfig
from enerf.loaded_run import load_run
from enerf.splats.bake import field_candidates
from enerf.splats.teacher import SURFACE_ACC, _teacher_cameras, turned_poses
from enerf.views import render_views


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ckpt", required=True)
    p.add_argument("--datadir", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--data_root", default="../shared/data")
    p.add_argument("--out", default="runs/turn_spread")
    args = p.parse_args()
    run = load_run(args.ckpt, Path(args.data_root), "cpu", task="nerf", datadir=args.datadir)
    cfg = SplatConfig(teacher_turn=20.0)
    _, rendered = field_candidates(run, cfg, progress=False)
    cams = _teacher_cameras(run, cfg, turned_poses(rendered[0][::4], 20.0), "turned")
    acc, spread, hit, rows = [], [], [], []
    for k, v in enumerate(render_views(run, cams, normals=False, progress=True, depth="median")):
        acc.append(v.acc.ravel()), spread.append(v.spread.ravel()), hit.append(v.hit.ravel())
        if k < 8:
            opaque = v.hit & (v.acc >= SURFACE_ACC)
            rows.append(np.concatenate([v.rgb] + [np.where((opaque & (v.spread <= t))[..., None], v.rgb,
                                                           v.rgb * 0.25 + [0.75, 0.0, 0.0]) for t in (0.05, 0.1, 0.2)], 1))
    acc, spread, hit = np.concatenate(acc), np.concatenate(spread), np.concatenate(hit)
    print(f"{args.name}: {len(cams.poses)} turned views, {acc.size:,} pixels, {float((acc >= SURFACE_ACC).mean()):.3f} "
          "at least half opaque")
    for t in (0.02, 0.05, 0.1, 0.2, 0.5):
        print(f"  spread <= {t}: surface share {float((hit & (acc >= SURFACE_ACC) & (spread <= t)).mean()):.3f}")
    print("  spread quantiles 10/25/50/75/90 %:", np.round(np.quantile(spread[acc >= SURFACE_ACC], [0.1, 0.25, 0.5, 0.75, 0.9]), 3))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    iio.imwrite(out / f"{args.name}_turned.png", (np.clip(np.concatenate(rows, 0), 0, 1) * 255).astype(np.uint8))


if __name__ == "__main__":
    main()
