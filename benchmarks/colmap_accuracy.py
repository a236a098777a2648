"""Pose photos with ``enerf data colmap`` and compare the result with reference poses.

    python -m benchmarks.colmap_accuracy                       # fern images_8/ vs the release, seeds 0 1 2
    python -m benchmarks.colmap_accuracy --images DIR --reference poses_bounds.npy --focal_scale 8 --seeds 0
    python -m benchmarks.colmap_accuracy --images ../shared/data/nerfstudio/fox/images \
        --reference ../shared/data/nerfstudio/fox/transforms.json --focal_scale 1 --seeds 0 \
        --camera_model OPENCV --factors
    python -m benchmarks.colmap_accuracy --scene SCENE --reference transforms.json   # a scene posed before

Per seed: wall time of the whole command, registered photos, mean reprojection error, median
and largest camera-centre error (per cent of the largest distance of a reference centre from
their mean) and rotation error after a similarity (Umeyama) alignment of the centres, the range
of near / far bound ratios (ours x the alignment's scale over the reference's) and the focal
length against the reference's divided by ``--focal_scale`` (fern's release poses are for
4032 x 3024, its images_8/ is 504 x 378). ``--keep DIR`` keeps the scene of the first seed.

The reference is a ``poses_bounds.npy`` (same photos, same order) or a ``transforms.json``
(instant-ngp / nerfstudio; its frames are matched to ours by file name, and frames without a
photo are left out); with a transforms.json the bound ratios are not reported. ``--scene DIR``
compares a scene ``enerf data colmap`` wrote before (its ``poses_bounds.npy`` or
``transforms.json``) instead of posing the photos again.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from enerf.ingest.colmap import LLFF_CAMERA_MODELS, colmap_scene
from enerf.ingest.colmap_poses import pose_errors
from enerf.data.llff import read_poses_bounds
from enerf.data.transforms_reader import read_transforms

FERN = Path(os.environ.get("ENERF_SHARED_DATA", "../shared/data")) / "nerf_llff_data" / "fern"


def llff_poses_of_transforms(path: Path) -> dict[str, np.ndarray]:
    """File name -> LLFF pose [3, 4] (columns [down, right, back, centre]) of every frame of a
    transforms.json (OpenGL camera-to-world, columns [right, up, back, centre])."""
    poses = {}
    for frame in read_transforms(path)["frames"]:
        c2w = np.asarray(frame["transform_matrix"], dtype=np.float64)[:3]
        poses[Path(frame["file_path"]).name] = np.stack([-c2w[:, 1], c2w[:, 0], c2w[:, 2], c2w[:, 3]], 1)
    return poses


def scene_poses(scene: Path) -> tuple[dict[str, np.ndarray], np.ndarray | None, float]:
    """File name -> LLFF pose [3, 4+] of a scene written by enerf data colmap, its bounds [N, 2]
    (None for transforms.json) and its focal length."""
    if (scene / "poses_bounds.npy").is_file():
        poses, bounds = read_poses_bounds(scene / "poses_bounds.npy")
        names = sorted(p.name for p in (scene / "images").iterdir())
        return dict(zip(names, poses)), bounds, float(poses[0, 2, 4])
    meta = read_transforms(scene / "transforms.json")
    return llff_poses_of_transforms(scene / "transforms.json"), None, float(meta["fl_x"])


def compare(seed, seconds, info, scene: Path, reference: Path, focal_scale: float) -> str:
    """One table row: our scene against the reference."""
    ours, bounds, focal = scene_poses(scene)
    n_ref = None
    if reference.suffix == ".json":
        theirs_by_name = llff_poses_of_transforms(reference)
        names = [n for n in ours if n in theirs_by_name]
        theirs, their_bounds = np.stack([theirs_by_name[n] for n in names]), None
        their_focal = float(read_transforms(reference)["fl_x"])
        n_ref = len(names)
    else:
        theirs, their_bounds = read_poses_bounds(reference)
        names = list(ours)
        their_focal = float(theirs[0, 2, 4])
        n_ref = len(theirs)
    n = len(ours)
    reproj = f"{info['reprojection_error']:.2f}" if info else "-"
    if n != n_ref or len(names) != n:
        return f"| {seed} | {seconds} | {n} / {n_ref} | {reproj} | (not all registered) |"
    err = pose_errors(np.stack([ours[k][:, :4] for k in names]), theirs[:, :, :4])
    ratio = err["scale"] * bounds / their_bounds if bounds is not None and their_bounds is not None else None
    near = f"{ratio[:, 0].min():.3f}–{ratio[:, 0].max():.3f}" if ratio is not None else "-"
    far = f"{ratio[:, 1].min():.3f}–{ratio[:, 1].max():.3f}" if ratio is not None else "-"
    return (f"| {seed} | {seconds} | {n} / {n_ref} | {reproj} "
            f"| {100 * np.median(err['centre']):.2f} % / {100 * err['centre'].max():.2f} % "
            f"| {np.median(err['degrees']):.2f}° / {err['degrees'].max():.2f}° "
            f"| {near} | {far} | {focal / (their_focal / focal_scale):.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", default=str(FERN / "images_8"))
    parser.add_argument("--reference", default=str(FERN / "poses_bounds.npy"),
                        help="poses_bounds.npy (same photos) or transforms.json (matched by file name)")
    parser.add_argument("--focal_scale", type=float, default=8.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--matcher", default="exhaustive")
    parser.add_argument("--camera_model", default="SIMPLE_RADIAL",
                        help="COLMAP's camera model; one with two focal lengths writes --layout blender")
    parser.add_argument("--factors", type=int, nargs="*", default=[4, 8], help="images_<f>/ copies written")
    parser.add_argument("--keep", default=None, help="copy the first seed's scene here")
    parser.add_argument("--scene", default=None, help="compare this scene (written before) instead of posing again")
    args = parser.parse_args()
    reference = Path(args.reference)
    print("| seed | seconds | registered | reproj. px | centre err. median / max | rotation median / max "
          "| near ratio | far ratio | focal / reference |")
    print("|---|---|---|---|---|---|---|---|---|")
    if args.scene:
        print(compare("-", "-", None, Path(args.scene), reference, args.focal_scale))
        return
    for k, seed in enumerate(args.seeds):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "scene"
            start = time.perf_counter()
            layout = "llff" if args.camera_model in LLFF_CAMERA_MODELS else "blender"
            info = colmap_scene(args.images, out, factors=tuple(args.factors), matcher=args.matcher, layout=layout,
                                seed=seed, camera_model=args.camera_model, say=lambda _: None)
            seconds = f"{time.perf_counter() - start:.1f}"
            print(compare(seed, seconds, info, out, reference, args.focal_scale))
            if args.keep and k == 0:
                shutil.copytree(out, args.keep, dirs_exist_ok=False)


if __name__ == "__main__":
    main()
