"""How fast the viewer answers: time to the first preview after a camera move, to a
256-pixel-wide draft frame and to the exact frame at that width, for the demo, fern_cpu,
lego_cpu and capture (proposal sampler, the fox) checkpoints.

    python -m benchmarks.viewer                       # trains tiny checkpoints first (a few minutes)
    python -m benchmarks.viewer --ckpt demo=runs/demo/checkpoints/latest.pt --ckpt fern_cpu=... \
        --record benchmarks/viewer.json

Without ``--ckpt`` it trains each scene's config for ``--iters`` steps (the networks and renderers
of the configs, so the rendering cost is theirs; the pictures are not trained ones) into
``--out``. fern, lego and the fox come from ``--data`` (the shared data folder); a scene that is
not there is skipped with a note.

Wall time, and the rendering thread's CPU time (``time.thread_time``: what one free core would
take, with ``--threads 1``; the wall time on a loaded machine is longer). Measured with the
viewer's own loop (``enerf.viewer.server.Viewer.work``, JPEG / PNG encoding included) and a
stand-in for a browser whose canvas is 512 pixels wide at the scene's aspect ratio, looking
from a held-out camera: a camera move, then ``work`` until the exact frame at the resolution
cap (``--max_width``, 256 by default). The frames before it are drafts (``--draft`` of the
renderer's samples per ray, ``enerf.viewer.draft``), the last of them at the cap; the record
gives each frame's own time, the time from the move to the draft at the cap (all frames before
it included), and the PSNR of that draft against the exact frame. Each figure is the median of
``--repeats`` camera moves, after one warm-up. Targets: preview within 0.3 s, 256-wide frame
within 2 s. ``--record FILE`` writes the rows, the command, the torch threads and the load
average (``benchmarks.harness.load_average``) before and after into a JSON record.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np


from enerf.cli import main as enerf_main
from enerf.config import ViewerConfig
from enerf.loaded_run import load_run
from enerf.runfolder import read_metrics
from enerf.viewer.scene import viser_from_c2w
from enerf.viewer.server import Viewer
from enerf.viewer.session import Browser

from benchmarks.harness import ROOT, TRAINING_CODE, command_line, git_commit, load_average, machine, write_record

SCENES = {  # name -> (config file, scene flags, folder under --data that must exist)
    "demo": ("configs/demo.txt", [], None),
    "fern_cpu": ("configs/fern_cpu.txt", ["--datadir", "{data}/nerf_llff_data/fern"], "nerf_llff_data/fern"),
    # every 40th test view: the tiny checkpoint's final evaluation renders 5 views of 400 x 400, not 25
    "lego_cpu": ("configs/lego_cpu.txt", ["--datadir", "{data}/nerf_synthetic/lego", "--testskip", "40"],
                 "nerf_synthetic/lego"),
    "capture": ("configs/capture_cpu.txt", ["--datadir", "{data}/nerfstudio/fox"], "nerfstudio/fox"),
}


class _Camera:
    def __init__(self, c2w: np.ndarray, fov: float, width: int, height: int) -> None:
        self.wxyz, self.position = viser_from_c2w(c2w)
        self.fov, self.image_width, self.image_height = fov, width, height
        self.aspect = width / height


class _Scene:
    def __init__(self) -> None:
        self.image = None  # the last frame sent, uint8 [H, W, 3]

    def set_background_image(self, image, format="jpeg", jpeg_quality=None):  # noqa: A002 (viser's name)
        import imageio.v3 as iio

        iio.imwrite(io.BytesIO(), image, extension=".png" if format == "png" else ".jpg")  # the encoding cost
        self.image = image


class _Client:
    """What ``Viewer.work`` uses of a browser: its camera, and a scene to send the frame to."""

    def __init__(self, camera: _Camera) -> None:
        self.client_id, self.camera, self.scene = 0, camera, _Scene()


# what the figures depend on (benchmarks/pages: a later commit to these makes the record stale)
DEPENDS = TRAINING_CODE + ["enerf/viewer", "benchmarks/viewer.py"]

def train_tiny(name: str, out: Path, data: Path, iters: int) -> Path | None:
    config, flags, needs = SCENES[name]
    if needs and not (data / needs).is_dir():
        print(f"{name}: {data / needs} not found, skipped")
        return None
    ckpt = out / name / "checkpoints" / "latest.pt"
    if ckpt.is_file():
        return ckpt
    argv = ["train", "--config", str(ROOT / config), "--basedir", str(out), "--expname", name, "--iters", str(iters),
            "--time_budget", "0", "--eval_every", "0", "--kappa_every", "0", "--no_lpips", "--quiet", "--video", "none",
            *[f.format(data=data) for f in flags]]
    print(f"{name}: training {iters} steps ({config})", flush=True)
    if enerf_main(argv) != 0:
        raise SystemExit(f"training {name} failed")
    return ckpt


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) / 255.0 - b.astype(np.float64) / 255.0) ** 2))
    return float("inf") if mse == 0 else -10.0 * float(np.log10(mse))


def bench(name: str, ckpt: Path, cfg: ViewerConfig, canvas: int, repeats: int, data: Path) -> dict:
    run = load_run(ckpt, data, task="nerf")
    viewer = Viewer(cfg, title="bench")
    try:
        viewer.attach([run], [read_metrics(run.folder / "metrics.json")])
        scene = run.scene
        pose = scene.poses[int(scene.i_test[0]) if len(scene.i_test) else 0].astype(np.float64)
        height = int(round(canvas * scene.height / scene.width))
        fov = 2 * np.arctan(0.5 * scene.height / scene.focal)
        client = _Client(_Camera(pose, fov, canvas, height))
        browser = Browser(client)
        viewer._browsers[0] = browser
        rows = []
        for k in range(repeats + 1):
            moved = pose.copy()
            moved[:3, 3] += 0.01 * (k + 1) * pose[:3, 0]  # a camera move
            client.camera = _Camera(moved, fov, canvas, height)
            browser.version += 1
            frames, tic = [], time.perf_counter()  # (info, cpu seconds, seconds since the move, image)
            while not frames or not browser.done:
                cpu = time.thread_time()
                viewer.work()
                frames.append((browser.last, time.thread_time() - cpu, time.perf_counter() - tic,
                               client.scene.image))
            draft = [f for f in frames if f[0].draft and f[0].width == browser.last.width] or frames[-1:]
            if k:  # the first move warms up
                rows.append({"preview_s": frames[0][0].seconds, "cpu_preview_s": frames[0][1],
                             "preview_width": frames[0][0].width,
                             "draft_s": draft[0][0].seconds, "cpu_draft_s": draft[0][1], "to_draft_s": draft[0][2],
                             "final_s": frames[-1][0].seconds, "cpu_final_s": frames[-1][1],
                             "to_final_s": frames[-1][2], "draft_psnr": _psnr(draft[0][3], frames[-1][3])})
        out = {"scene": name, "ckpt": str(ckpt), "step": run.step, "size": f"{scene.width}x{scene.height}",
               "renderer": run.cfg.render.sampler, "final_width": browser.last.width,
               "final_height": browser.last.height, "device": str(run.device), "draft": cfg.draft}
        for key in rows[0]:
            out[key] = statistics.median(r[key] for r in rows)
        out["preview_width"] = int(out["preview_width"])
        return out
    finally:
        viewer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", action="append", default=[],
                        help="NAME=PATH of a checkpoint (else tiny ones are trained)")
    parser.add_argument("--scenes", nargs="+", default=list(SCENES), choices=list(SCENES))
    parser.add_argument("--out", default="runs/bench_viewer", help="where tiny checkpoints are trained")
    parser.add_argument("--data", default=os.environ.get("ENERF_SHARED_DATA") or str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--iters", type=int, default=50, help="steps of each tiny checkpoint")
    parser.add_argument("--max_width", type=int, default=256, help="the resolution cap: the finest frame's width")
    parser.add_argument("--canvas", type=int, default=512, help="width of the stand-in browser's canvas")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (2: the CPU target)")
    parser.add_argument("--draft", type=float, default=ViewerConfig.draft,
                        help="fraction of samples per ray of the draft frames (1: every frame exact)")
    parser.add_argument("--record", default="", help="write the rows into this JSON record")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    ckpts = dict(item.split("=", 1) for item in args.ckpt)
    if not ckpts:
        for name in args.scenes:
            path = train_tiny(name, Path(args.out), Path(args.data), args.iters)
            if path is not None:
                ckpts[name] = str(path)
    cfg = ViewerConfig(port=0, max_width=args.max_width, draft=args.draft)
    load_before = load_average()
    rows = []
    for name, path in ckpts.items():
        rows.append(bench(name, Path(path), cfg, args.canvas, args.repeats, ROOT / "data"))
        print(json.dumps(rows[-1]), flush=True)  # each scene as it is done
    load_after = load_average()
    print(f"\n| scene | images | renderer | first preview: wall (CPU) | {args.max_width}-px draft: wall (CPU), "
          "from the move | exact frame: wall (CPU) | draft vs exact |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['scene']} | {r['size']} | {r['renderer']} | {r['preview_s']:.2f} s ({r['cpu_preview_s']:.2f} s), "
              f"{r['preview_width']} px wide | {r['draft_s']:.2f} s ({r['cpu_draft_s']:.2f} s), {r['to_draft_s']:.2f} s | "
              f"{r['final_s']:.2f} s ({r['cpu_final_s']:.2f} s), {r['final_width']}x{r['final_height']} | "
              f"{r['draft_psnr']:.1f} dB |")
    print(f"(device {rows[0]['device'] if rows else '-'}, torch threads {args.threads}, draft {args.draft:g}; CPU: "
          f"the rendering thread's CPU time; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after)")
    if args.record:
        write_record(args.record, {
            "command": command_line(), "depends": DEPENDS, "machine": machine(), "commit": git_commit(),
            "threads": args.threads,
            "max_width": args.max_width, "canvas": args.canvas, "repeats": args.repeats, "draft": args.draft,
            "cpu_count": os.cpu_count(), "loadavg_before": list(load_before), "loadavg_after": list(load_after),
            "rows": rows})


if __name__ == "__main__":
    main()
