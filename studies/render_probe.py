"""How long one whole view takes to render from a capture model on a CPU: the path of scoring,
videos and the viewer (``enerf.render.images.render_rays_image``), timed as it is.

    python -m studies.render_probe                       # a capture-config model, random init
    python -m studies.render_probe --ckpt runs/x/checkpoints/latest.pt   # a trained one, a held-out camera
    python -m studies.render_probe --profile             # where the time goes (torch's profiler)

The model is ``--config``'s (default configs/capture_cpu.txt: proposal sampler, 128 proposal
intervals then 48 field samples, triplane), seeded random weights unless ``--ckpt`` is given.
The view is ``--width`` x ``--height`` pixels (default 402 x 276, a capture's held-out view at
factor 4): with ``--ckpt`` the first held-out camera of its scene, its focal scaled to that size,
else a camera on the unit sphere looking at the origin. The render is repeated ``--repeats``
times (after a warm-up on its first rows) on ``--threads`` torch threads, timed in wall seconds and
in CPU seconds of this process (on a shared machine the CPU time is the steadier figure: it leaves
out the time the process waited for a core); the minimum is the figure, and the load averages
before and after are printed with it.

Prints one JSON object: seconds per view (min, all; wall and CPU), rays per CPU second, the image's
mean colour and a SHA-256 of its float32 bytes; ``--save`` / ``--against`` compare the image of two
versions of the code (largest difference, PSNR between them); ``--proposal_samples N`` times a
render with fewer proposal intervals and says how far its image lies from the model's own.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import time

import numpy as np
import torch

from enerf.cameras.rays import Rays, make_rays
from enerf.config import DATA_ROOT
from enerf.render.build import build_fields
from enerf.render.build import build_renderer
from enerf.render.images import render_rays_image

from benchmarks.harness import load_average, machine


def _look_at_origin(eye: np.ndarray) -> torch.Tensor:
    """[3, 4] camera-to-world (columns right, up, back, position) at ``eye`` looking at the origin."""
    back = eye / np.linalg.norm(eye)
    right = np.cross([0.0, 0.0, 1.0], back)
    right /= np.linalg.norm(right)
    up = np.cross(back, right)
    return torch.tensor(np.stack([right, up, back, eye], 1), dtype=torch.float32)


def model_and_rays(args):
    """(fields, renderer, cfg, rays [H, W]) of the run or of a seeded capture-config model."""
    width, height = args.width, args.height
    if args.ckpt:
        from enerf.loaded_run import load_run

        run = load_run(args.ckpt, DATA_ROOT, "cpu", task="nerf", images=False)
        scene, cfg = run.scene, run.cfg
        index = int(scene.i_test[0]) if len(scene.i_test) else 0
        focal = scene.focal * width / scene.width
        c2w = torch.tensor(scene.poses[index], dtype=torch.float32)
        rays = make_rays(height, width, focal, c2w, scene.near, scene.far, scene.use_ndc)
        return run.fields, run.renderer, cfg, rays
    from enerf.cli.train import build_train_parser, run_config_from_args

    cfg = run_config_from_args(build_train_parser().parse_args(["--config", args.config]))
    torch.manual_seed(args.seed)
    fields = build_fields(cfg.field, torch.device("cpu"), cfg.render)
    eye = np.array([0.6, -0.6, 0.5])
    focal = 0.5 * width / math.tan(0.5 * math.radians(60.0))
    rays = make_rays(height, width, focal, _look_at_origin(eye), 0.05, cfg.data.far or 1000.0, False)
    return fields, None, cfg, rays


def _timed(render) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds of this process, the output) of one ``render()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = render()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def _compare(rgb: np.ndarray, other: np.ndarray) -> dict:
    """The largest difference of two renders of the view and the PSNR of one against the other."""
    mse = float(np.mean((rgb.astype(np.float64) - other) ** 2))
    return {"max_abs_diff": float(np.abs(rgb - other).max()),
            "psnr_between": round(-10 * math.log10(mse), 2) if mse > 0 else math.inf}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", default="", help="a NeRF checkpoint (default: a seeded random --config model)")
    parser.add_argument("--config", default="configs/capture_cpu.txt", help="the model without --ckpt")
    parser.add_argument("--width", type=int, default=402)
    parser.add_argument("--height", type=int, default=276)
    parser.add_argument("--chunk", type=int, default=0, help="rays per forward pass (0: the config's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default="", help="write the rendered rgb [H, W, 3] float32 here (.npy)")
    parser.add_argument("--against", default="", help="an rgb saved by --save (another version of the code): "
                        "print the largest difference and the PSNR between the two")
    parser.add_argument("--proposal_samples", type=int, default=0, help="also render with this many proposal "
                        "intervals per ray (inference only) and print its time and PSNR against the model's own")
    parser.add_argument("--profile", action="store_true", help="also print torch's profiler table of one render")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = load_average()
    fields, renderer, cfg, rays = model_and_rays(args)
    device = torch.device("cpu")
    if renderer is None:
        renderer = build_renderer(cfg.render, device, rays=rays, read_off=fields["coarse"])
    chunk = args.chunk or None

    def render(render_cfg=cfg.render, with_renderer=renderer, view=rays):
        return render_rays_image(view, fields, render_cfg, device, chunk=chunk, renderer=with_renderer)

    render(view=Rays(*(t[:4] for t in rays)))  # warm-up: the first rows
    times = [_timed(render) for _ in range(args.repeats)]
    rgb = times[-1][2]["rgb"].contiguous().numpy().astype(np.float32)
    n_rays = args.width * args.height
    record = {
        "model": args.ckpt or f"{args.config} (seeded random weights, seed {args.seed})",
        "view": [args.width, args.height], "rays": n_rays, "chunk": chunk or cfg.render.chunk,
        "renderer": cfg.render.sampler, "samples": [*cfg.render.proposal_samples, cfg.render.n_samples]
        if cfg.render.sampler == "proposal" else [cfg.render.n_samples, cfg.render.n_importance],
        "seconds_min": round(min(t[0] for t in times), 3), "seconds": [round(t[0], 3) for t in times],
        "cpu_seconds_min": round(min(t[1] for t in times), 3), "cpu_seconds": [round(t[1], 3) for t in times],
        "rays_per_cpu_second": round(n_rays / min(t[1] for t in times)),
        "rgb_mean": [round(float(v), 6) for v in rgb.reshape(-1, 3).mean(0)],
        "rgb_sha256": hashlib.sha256(rgb.tobytes()).hexdigest()[:16],
    }
    if args.save:
        np.save(args.save, rgb)
    if args.against:
        record["against"] = {"file": args.against, **_compare(rgb, np.load(args.against))}
    if args.proposal_samples and cfg.render.sampler == "proposal":
        counts = (args.proposal_samples,) * len(cfg.render.proposal_samples)
        fewer = dataclasses.replace(cfg.render, proposal_samples=counts)
        fewer_renderer = build_renderer(fewer, device)
        timed = [_timed(lambda: render(fewer, fewer_renderer)) for _ in range(args.repeats)]
        fast = timed[-1][2]["rgb"].numpy().astype(np.float32)
        record["fewer_proposal_samples"] = {"proposal_samples": args.proposal_samples,
                                            "cpu_seconds_min": round(min(t[1] for t in timed), 3),
                                            **_compare(fast, rgb)}
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            render()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    record.update({"threads": torch.get_num_threads(), "machine": machine(), "load_before": load_before,
                   "load_after": load_average()})
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
