"""What a viewer draft of a proposal-sampler checkpoint costs: one held-out camera rendered at a
256-pixel width with the draft renderer (``enerf.viewer.draft``) under other sample counts, timed
(median of ``--repeats`` after a warm-up) and scored against the exact frame (PSNR).

    python -m studies.draft_probe --ckpt runs/bench_proposal/fox-s0/checkpoints/latest.pt
    python -m studies.draft_probe --ckpt C --variants 64x12 32x12 48x12 64x8 32x8

A variant ``PxN`` reads P intervals in every proposal pass and N samples of the field (the draft
of ``--draft 0.25`` on ``configs/capture_cpu.txt`` is 32x12; before, 64x12). Run it with nothing
else on the machine: the figures are wall times.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import numpy as np
import torch

from enerf.config import DATA_ROOT
from enerf.loaded_run import load_run
from enerf.render.proposal import ProposalEstimator
from enerf.viewer import draft
from enerf.viewer.render import render_camera

from benchmarks.harness import load_average


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", required=True, help="a checkpoint of the proposal renderer")
    parser.add_argument("--variants", nargs="+", default=["64x12", "48x12", "32x12", "64x8", "32x8"])
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    run = load_run(args.ckpt, DATA_ROOT, "cpu", images=False)
    scene = run.scene
    c2w = np.asarray(scene.poses[scene.i_test[0]])
    width = args.width
    height = int(round(scene.height * width / scene.width))
    focal = scene.focal * width / scene.width
    print(f"load average before {load_average()}; {width}x{height}, held-out view {int(scene.i_test[0])}", flush=True)
    tic = time.perf_counter()
    exact = render_camera(run, c2w, width, height, focal)
    print(f"exact frame: {time.perf_counter() - tic:.2f} s", flush=True)
    saved = vars(ProposalEstimator)["draft_config"]  # the classmethod, restored below
    base = ProposalEstimator.draft_config
    try:
        for variant in args.variants:
            intervals, samples = (int(x) for x in variant.split("x"))

            def config(cls, cfg, fraction, intervals=intervals, samples=samples):
                return dataclasses.replace(base(cfg, fraction), n_samples=samples,
                                           proposal_samples=tuple(intervals for _ in cfg.proposal_samples))

            ProposalEstimator.draft_config = classmethod(config)
            draft._cache.clear()
            render_camera(run, c2w, width, height, focal, draft=0.25)  # build and warm up
            times = []
            for _ in range(args.repeats):
                tic = time.perf_counter()
                image = render_camera(run, c2w, width, height, focal, draft=0.25)
                times.append(time.perf_counter() - tic)
            psnr = -10.0 * np.log10(np.mean((image - exact) ** 2))
            print(f"{variant}: {statistics.median(times):.2f} s (min {min(times):.2f}), {psnr:.1f} dB against the exact frame",
                  flush=True)
    finally:
        ProposalEstimator.draft_config = saved
        draft._cache.clear()
    print(f"load average after {load_average()}")


if __name__ == "__main__":
    main()
