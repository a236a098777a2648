"""Why a held-out view scores far below the others: its error by image band, how far its camera
is from the training cameras, and whether a shifted rendering fits it better (pose error).

For every held-out view of a finished NeRF run (``<run>/test_views/view_NNN.png`` against the
scene's image) it reports

* the PSNR of the whole view and of each of ``--bands`` horizontal bands (top to bottom), and the
  share of the view's squared error that lies in its worst band: error in one band of an
  otherwise well-fitted view is content that is not in the static scene (people walking behind a
  capture), error spread over the view is the field's or the cameras';
* the distance from its camera centre to the nearest training camera, divided by the median of
  the same distance over the training cameras (each to its nearest other one): far above 1 is a
  viewpoint the training photos did not come close to;
* the gain in PSNR from shifting the rendering by whole pixels (up to ``--shift`` each way): a
  camera that is off shows as a shift that fits better than none; with ``--step`` below 1 the best
  shift is refined to that fraction of a pixel (the rendering moved by Fourier interpolation, which
  does not blur it, as a bilinear one would: blur alone can raise a sharp rendering's PSNR).

``--views test_views_splats`` reads the run's splat renderings (``enerf train`` on a capture, or
``enerf eval --splats``) instead of the field's.

    python -m studies.view_gap --run runs/bench_proposal_30min/boardgame-s0 \\
        --figure docs/img/boardgame_worst_view.png --record benchmarks/view_gap.json --name boardgame_30min
    python -m studies.view_gap --run runs/capture_splats/sargos --views test_views_splats --step 0.25

The renderings are the run's 8-bit PNGs, so the PSNRs differ from ``metrics.json``'s in the
second decimal at most. No rendering happens here: it reads images only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
from scipy import ndimage

from enerf.config import DATA_ROOT
from enerf.errors import EnerfError
from enerf.loaded_run import load_run
from enerf.metrics import mse_to_psnr

from benchmarks.harness import write_record


def psnr(se: np.ndarray) -> float:
    """PSNR in dB of the mean of squared errors ``se`` (any shape, images in [0, 1]; inf when 0)."""
    return mse_to_psnr(float(np.mean(se)))


def band_psnrs(se: np.ndarray, bands: int) -> tuple[list[float], float]:
    """se: [H, W] per-pixel squared error -> (PSNR of each of ``bands`` horizontal bands, top
    first; the share of the total squared error in the band with the most)."""
    edges = np.linspace(0, se.shape[0], bands + 1).round().astype(int)
    parts = [se[a:b] for a, b in zip(edges[:-1], edges[1:])]
    sums = np.array([p.sum() for p in parts])
    return [psnr(p) for p in parts], float(sums.max() / max(sums.sum(), 1e-12))


def shift_gain(gt: np.ndarray, pred: np.ndarray, reach: int) -> tuple[float, int, int]:
    """gt, pred: [H, W, 3]. Over the central crop (``reach`` pixels off each side), the PSNR of pred
    shifted by the best (dy, dx), |dy|, |dx| <= reach, minus that of pred unshifted: (dB, dy, dx)."""
    h, w = gt.shape[:2]
    core = pred[reach:h - reach, reach:w - reach]
    scores = {(dy, dx): psnr((gt[reach + dy:h - reach + dy, reach + dx:w - reach + dx] - core) ** 2)
              for dy in range(-reach, reach + 1) for dx in range(-reach, reach + 1)}
    dy, dx = max(scores, key=scores.get)
    return scores[dy, dx] - scores[0, 0], dy, dx


def subpixel_shift_gain(gt: np.ndarray, pred: np.ndarray, reach: int, step: float, margin: int = 16
                        ) -> tuple[float, float, float]:
    """gt, pred: [H, W, 3]. ``shift_gain``'s best whole-pixel shift refined to ``step`` pixels (coarse to fine:
    halving the step from 0.5 px, 3 x 3 shifts around the best so far), ``pred`` moved by Fourier interpolation.
    Scored over the central crop ``reach + margin`` pixels off each side (the Fourier shift wraps around and rings
    at the borders): (dB gained over no shift, dy, dx), pred[y, x] ~ gt[y + dy, x + dx] as in ``shift_gain``."""
    h, w = gt.shape[:2]
    m = reach + margin
    spectrum = np.fft.fftn(pred)

    def score(dy: float, dx: float) -> float:
        moved = np.fft.ifftn(ndimage.fourier_shift(spectrum, (dy, dx, 0.0))).real
        return psnr((gt[m:h - m, m:w - m] - moved[m:h - m, m:w - m]) ** 2)

    _, dy, dx = shift_gain(gt, pred, reach)
    best, size = (float(dy), float(dx)), 0.5
    scores = {best: score(*best)}
    while size >= step - 1e-9:
        for oy in (-size, 0.0, size):
            for ox in (-size, 0.0, size):
                at = (best[0] + oy, best[1] + ox)
                if max(abs(at[0]), abs(at[1])) <= reach and at not in scores:
                    scores[at] = score(*at)
        best = max(scores, key=scores.get)
        size /= 2
    return scores[best] - score(0.0, 0.0), best[0], best[1]


def camera_distances(centres: np.ndarray, i_train: np.ndarray, i_test: np.ndarray) -> dict[int, float]:
    """centres: [N, 3] camera centres. For each held-out view, the distance to the nearest training
    camera over the median nearest-neighbour distance among the training cameras."""
    train = centres[i_train]
    pair = np.linalg.norm(train[:, None] - train[None], axis=-1)
    np.fill_diagonal(pair, np.inf)
    spacing = float(np.median(pair.min(axis=1)))
    return {int(i): float(np.linalg.norm(train - centres[i], axis=-1).min() / spacing) for i in i_test}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", required=True, help="a finished run folder (checkpoints/latest.pt, test_views/)")
    parser.add_argument("--datadir", default=None, help="the scene folder, where the one recorded at training moved")
    parser.add_argument("--bands", type=int, default=4, help="horizontal bands the error is split into")
    parser.add_argument("--shift", type=int, default=2, help="largest whole-pixel shift tried each way")
    parser.add_argument("--step", type=float, default=1.0,
                        help="the best shift to this fraction of a pixel (1: whole pixels; 0.25: a quarter)")
    parser.add_argument("--views", default="test_views",
                        help="the run's folder of renderings (test_views_splats: the splats')")
    parser.add_argument("--figure", default="", help="PNG: the worst view, its rendering and the error (x3)")
    parser.add_argument("--record", default="", help="JSON record to add this run to (under --name)")
    parser.add_argument("--name", default="", help="the run's key in the record (default: the run folder's name)")
    args = parser.parse_args()
    folder = Path(args.run)
    if not (folder / args.views).is_dir():
        print(f"view_gap: {folder}/{args.views}/ not found; pass a finished NeRF run folder (enerf train writes "
              "test_views/ at the end, and test_views_splats/ when it ends in splats)", file=sys.stderr)
        return 2
    if not 0 < args.step <= 1:
        print(f"view_gap: --step {args.step} is not in (0, 1]; give a fraction of a pixel such as 0.25",
              file=sys.stderr)
        return 2
    try:
        run = load_run(folder / "checkpoints" / "latest.pt", DATA_ROOT, "cpu", task="nerf", datadir=args.datadir,
                       images=True)
    except EnerfError as error:
        print(f"view_gap: {error}", file=sys.stderr)
        return 2
    scene = run.scene
    distances = camera_distances(scene.poses[:, :3, 3], scene.i_train, scene.i_test)
    views = {}
    for index in scene.i_test:
        index = int(index)
        gt = scene.image(index)
        pred = iio.imread(folder / args.views / f"view_{index:03d}.png").astype(np.float32)[..., :3] / 255.0
        se = ((gt - pred) ** 2).mean(-1)
        bands, share = band_psnrs(se, args.bands)
        gain, dy, dx = (shift_gain(gt, pred, args.shift) if args.step >= 1
                        else subpixel_shift_gain(gt, pred, args.shift, args.step))
        views[index] = {"psnr": psnr(se), "band_psnr": bands, "worst_band_error_share": share,
                        "nearest_train_camera": distances[index], "best_shift": [dy, dx], "best_shift_gain_db": gain}
    mean = float(np.mean([v["psnr"] for v in views.values()]))
    worst = min(views, key=lambda i: views[i]["psnr"])
    print(f"{folder}: {len(views)} held-out views, mean {mean:.2f} dB (of the PNGs); bands top to bottom")
    print("view   PSNR  below mean  bands (dB)                     worst band's share  camera distance  best shift")
    for index, v in views.items():
        print(f"{index:4d} {v['psnr']:6.2f} {mean - v['psnr']:8.2f}    "
              f"{' '.join(f'{b:5.2f}' for b in v['band_psnr']):30s} {v['worst_band_error_share']:10.2f}"
              f"{v['nearest_train_camera']:17.2f}   {v['best_shift']} {v['best_shift_gain_db']:+.2f} dB")
    if args.figure:
        gt = scene.image(worst)
        pred = iio.imread(folder / args.views / f"view_{worst:03d}.png").astype(np.float32)[..., :3] / 255.0
        error = np.repeat(np.abs(gt - pred).mean(-1, keepdims=True) * 3.0, 3, -1).clip(0.0, 1.0)
        strip = (np.concatenate([gt, pred, error], 1) * 255.0 + 0.5).astype(np.uint8)
        iio.imwrite(args.figure, strip)
        print(f"wrote {args.figure}: view {worst}, photo | rendering | |error| x 3")
    if args.record:
        path = Path(args.record)
        record = json.loads(path.read_text()) if path.is_file() else {
            "what": "held-out views by image band, camera distance and best shift (studies/view_gap.py)"}
        record[args.name or folder.name] = {
            "command": "python -m studies.view_gap " + " ".join(sys.argv[1:]),
            "run": str(folder), "renderings": args.views, "shift_step": args.step, "step": run.step,
            "mean_psnr": mean, "worst_view": worst, "views": {str(i): v for i, v in views.items()}}
        write_record(path, record)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
