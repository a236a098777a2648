"""Probes of the splat bake's fit, comparable on a shared machine (benchmarks/README.md, "Splats baked from the field").

Two modes:

* ``--steps N``: start the splats from the field (``enerf.splats.bake.init_splats``), fit them for
  exactly N steps, whatever the machine's load (the fit's clock is replaced by one that advances
  one second per step), and score them on every held-out view at the training size. Any
  ``SplatConfig`` field is a ``key=value`` argument (``fit_downscale=2``, ``densify_every=50``...).
* ``--tiles``: the process (CPU) time of one fit step at the training size for tiles of 2, 4, 8 and
  16 px, one thread (load-independent to first order).

    python -m studies.splat_fit_probe --ckpt runs/splat_src/fox/checkpoints/latest.pt \\
        --datadir ../shared/data/nerfstudio/fox --steps 400 fit_downscale=1 densify_every=0
    python -m studies.splat_fit_probe --ckpt ... --datadir ... --tiles
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch


class _StepClock:
    """Stands in for ``time`` inside ``enerf.splats.bake``: the fit reads it twice a step, so half a
    second a read makes ``bake_seconds`` a step count."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 0.5
        return self.now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--datadir", default=None)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--tiles", action="store_true")
    parser.add_argument("overrides", nargs="*", help="SplatConfig fields as key=value")
    args = parser.parse_args()
    torch.set_num_threads(1)
    import numba

    numba.set_num_threads(1)
    import enerf.splats.bake as bake
    import enerf.splats.tiles as tiles
    from enerf.config import DATA_ROOT, SplatConfig
    from enerf.loaded_run import load_run
    from enerf.metrics import mse_to_psnr
    from enerf.splats import Splats
    from enerf.splats.rasterize import rasterize
    from enerf.splats.source import run_background

    kw = dict(a.split("=", 1) for a in args.overrides)
    base = SplatConfig()
    cfg = SplatConfig(**{k: type(getattr(base, k))(v) for k, v in kw.items()}, bake_seconds=float(args.steps))
    run = load_run(args.ckpt, DATA_ROOT, "cpu", task="nerf", images=True, datadir=args.datadir)
    start, _, _ = bake.init_splats(run, cfg, progress=False)
    if args.tiles:
        cams = run.scene.cameras(run.scene.i_train[:4], cfg.fit_downscale)
        params = {k: t.clone().requires_grad_(True) for k, t in start.tensors().items()}
        for size in (2, 4, 8, 16):
            tiles.TILE = size
            for i, cam in enumerate([cams[0], *cams]):
                if i == 1:
                    tic = time.process_time()
                rasterize(Splats(**params), cam, torch.ones(3))["rgb"].mean().backward()
            print(f"tiles of {size} px: {(time.process_time() - tic) / len(cams):.3f} s of CPU a fit step", flush=True)
        return
    bake.time = _StepClock()
    wall = time.time()
    fitted, steps, _ = bake.fit_splats(run, start, cfg, cfg.bake_seconds, progress=False)
    psnrs = []
    with torch.no_grad():
        for cam, i in zip(run.scene.cameras(run.scene.i_test), run.scene.i_test):
            rgb = rasterize(fitted, cam, run_background(run.cfg.render))["rgb"].clamp(0, 1).numpy()
            psnrs.append(float(mse_to_psnr(float(((rgb - run.scene.image(int(i))) ** 2).mean()))))
    print(f"{kw} steps {steps}, {len(fitted):,} splats: held-out PSNR {np.mean(psnrs):.2f} dB "
          f"({', '.join(f'{p:.2f}' for p in psnrs)}); {time.time() - wall:.0f} s wall", flush=True)


if __name__ == "__main__":
    main()
