"""Pose photos with ``enerf data colmap`` and compare the result with reference poses.

    python tools/colmap_accuracy.py                       # fern images_8/ vs the release, seeds 0 1 2
    python tools/colmap_accuracy.py --images DIR --reference poses_bounds.npy --focal_scale 8 --seeds 0

Per seed: wall time of the whole command, registered photos, mean reprojection error, median
and largest camera-centre error (per cent of the largest distance of a reference centre from
their mean) and rotation error after a similarity (Umeyama) alignment of the centres, the range
of near / far bound ratios (ours x the alignment's scale over the reference's) and the focal
length against the reference's divided by ``--focal_scale`` (fern's release poses are for
4032 x 3024, its images_8/ is 504 x 378). ``--keep DIR`` keeps the scene of the first seed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from enerf.data.colmap import colmap_scene
from enerf.data.colmap_poses import pose_errors
from enerf.data.llff import read_poses_bounds

FERN = Path(os.environ.get("ENERF_SHARED_DATA", "../shared/data")) / "nerf_llff_data" / "fern"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", default=str(FERN / "images_8"))
    parser.add_argument("--reference", default=str(FERN / "poses_bounds.npy"))
    parser.add_argument("--focal_scale", type=float, default=8.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--matcher", default="exhaustive")
    parser.add_argument("--keep", default=None, help="copy the first seed's scene here")
    args = parser.parse_args()
    theirs, their_bounds = read_poses_bounds(Path(args.reference))
    print("| seed | seconds | registered | reproj. px | centre err. median / max | rotation median / max "
          "| near ratio | far ratio | focal / reference |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k, seed in enumerate(args.seeds):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "scene"
            start = time.perf_counter()
            info = colmap_scene(args.images, out, matcher=args.matcher, seed=seed, say=lambda _: None)
            seconds = time.perf_counter() - start
            ours, bounds = read_poses_bounds(out / "poses_bounds.npy")
            if args.keep and k == 0:
                shutil.copytree(out, args.keep, dirs_exist_ok=False)
        n = len(info["registered"])
        if n != len(theirs):
            print(f"| {seed} | {seconds:.1f} | {n} / {len(theirs)} | {info['reprojection_error']:.2f} | (not all registered) |")
            continue
        err = pose_errors(ours, theirs)
        ratio = err["scale"] * bounds / their_bounds
        focal = ours[0, 2, 4] / (theirs[0, 2, 4] / args.focal_scale)
        print(f"| {seed} | {seconds:.1f} | {n} / {len(theirs)} | {info['reprojection_error']:.2f} "
              f"| {100 * np.median(err['centre']):.2f} % / {100 * err['centre'].max():.2f} % "
              f"| {np.median(err['degrees']):.2f}° / {err['degrees'].max():.2f}° "
              f"| {ratio[:, 0].min():.3f}–{ratio[:, 0].max():.3f} | {ratio[:, 1].min():.3f}–{ratio[:, 1].max():.3f} "
              f"| {focal:.3f} |")


if __name__ == "__main__":
    main()
