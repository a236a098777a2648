"""Resident memory of the training data path on a scene of any size, made in memory (no files).

    python -m benchmarks.memory --views 50 --height 1920 --width 1080 [--channels 3] [--hold 8] [--batches 20] [--out REC.json]

Builds a ``Scene`` of ``--views`` images of random 8-bit codes (``--channels 4``: RGBA,
composited on white when read, as a Blender scene), cameras on an arc, every ``--hold``-th view
held out; then does what ``enerf train`` does with it before and during training: the ray
sampler, the occupancy grid's figures of the training rays (``RaySampler.extent``, a grid
renderer's start), ``--batches`` batches of ``--batch`` rays. Prints the peak resident memory
(``resource.getrusage``) after each stage, the images' bytes, and the sampler state's bytes as a
checkpoint holds it; ``--out``: also those figures as a JSON record (``benchmarks.harness``). Only
the data path: no network, no renderer, no evaluation.
"""

from __future__ import annotations

import argparse
import io
import resource
import sys
import time

import numpy as np
import torch

from benchmarks.harness import command_line, git_commit, load_average, machine, write_record


def peak_mib() -> float:
    """Peak resident set size of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--views", type=int, default=50)
    parser.add_argument("--height", type=int, default=1920)
    parser.add_argument("--width", type=int, default=1080)
    parser.add_argument("--channels", type=int, choices=(3, 4), default=3)
    parser.add_argument("--hold", type=int, default=8)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--out", default=None, help="write the figures to this JSON record")
    args = parser.parse_args()
    load_before = load_average()
    torch.set_num_threads(1)
    from tqdm import tqdm

    from enerf.data.images import Images
    from enerf.data.sampler import RaySampler
    from enerf.data.scene import Scene

    start = peak_mib()
    print(f"python + torch + enerf imported: peak {start:.0f} MiB")
    n, h, w = args.views, args.height, args.width
    codes = np.empty((n, h, w, args.channels), dtype=np.uint8)
    rng = np.random.default_rng(0)
    for k in tqdm(range(n), desc="images", leave=False):
        codes[k] = rng.integers(0, 256, (h, w, args.channels), dtype=np.uint8)
    images = Images(codes, 1.0 if args.channels == 4 else None)
    angles = np.linspace(-0.6, 0.6, n)
    poses = np.zeros((n, 3, 4), dtype=np.float32)
    for k, a in enumerate(angles):  # on an arc of radius 4 around the origin, looking at it
        poses[k, :3, :3] = [[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]]
        poses[k, :3, 3] = 4 * poses[k, :3, 2]
    i_test = np.arange(n)[:: args.hold]
    scene = Scene(name="memory", images=images, poses=poses, height=h, width=w, focal=0.8 * w,
                  bounds=np.tile([[2.0, 6.0]], (n, 1)).astype(np.float32), near=2.0, far=6.0, use_ndc=False,
                  i_train=np.setdiff1d(np.arange(n), i_test), i_test=i_test, render_poses=poses,
                  scene_to_world=np.eye(4))
    print(f"scene: {n} views of {w} x {h}, {len(scene.i_train)} for training ({len(scene.i_train) * h * w / 1e6:.1f} M "
          f"pixels); images {images.nbytes / 2**20:.0f} MiB as 8-bit codes "
          f"({n * h * w * 12 / 2**20:.0f} MiB as float32 RGB); peak {peak_mib():.0f} MiB")
    sampler = RaySampler(scene, scene.i_train, args.batch, torch.Generator().manual_seed(0))
    tic = time.perf_counter()
    extent = sampler.extent()
    print(f"occupancy grid figures of all training rays ({time.perf_counter() - tic:.1f} s): box "
          f"{[round(v, 2) for v in torch.cat([extent.lo, extent.hi]).tolist()]}, mean |d| "
          f"{extent.mean_direction_norm:.4f}; peak {peak_mib():.0f} MiB")
    tic = time.perf_counter()
    for _ in range(args.batches):
        rays, rgb = sampler.sample()
    per_batch = (time.perf_counter() - tic) / args.batches
    buf = io.BytesIO()
    torch.save(sampler.state_dict(), buf)
    figures = {"ms per batch": per_batch * 1e3, "permutation MiB": sampler.nbytes / 2**20, "peak MiB": peak_mib(),
               "sampler state KiB": buf.getbuffer().nbytes / 1024}
    print(f"{args.batches} batches of {args.batch} rays: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()))
    if args.out:
        write_record(args.out, {
            "what": "resident memory of enerf train's data path (sampler, occupancy-grid extent, batches) on a scene "
                    "of random 8-bit images made in memory; peaks include Python, torch and enerf",
            "command": command_line(), "machine": machine(), "commit": git_commit(),
            "load_before": load_before, "load_after": load_average(),
            "scene": {"views": n, "width": w, "height": h, "channels": args.channels,
                      "training_views": len(scene.i_train)},
            "summary": {"images_mib": round(images.nbytes / 2**20, 1), "peak_mib": round(figures["peak MiB"], 1),
                        "sampler_state_kib": round(figures["sampler state KiB"], 2),
                        "ms_per_batch": round(figures["ms per batch"], 2)}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
