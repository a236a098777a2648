"""Why a run's splats lose to its field on a held-out view: where the error sits, what an exposure or a
background would give back, and which of the three is sharper (issue 63's worst views).

For each held-out view of a run that ended in splats, the field and the splats rendered at the training size
(``field_source`` / ``splat_source``, as ``enerf eval`` renders them) against the photo:

- ``psnr`` of each; ``uncovered``: the share of pixels under half splat opacity, and ``uncovered_error``: the
  share of the splats' squared error that sits on them; ``psnr_background``: the splats' PSNR composited on the
  mean colour of the training photos instead of the run's background (what a constant background could give back);
- ``offset``: the splats' mean colour minus the photo's, per channel (0-1); ``psnr_affine``: the splats' PSNR
  after the affine colour transform (``enerf.fields.appearance.fit_affine``: a 3 x 3 matrix and an offset, the
  field's per-image appearance model) fitted to the whole photo by least squares (what a per-image exposure
  term could give back at most, on that view);
- ``sharpness``: the variance of the Laplacian of the grey image, field / photo / splats (motion blur in the
  photo, a blurred field, over-sharp splats).

The worst view (the splats' PSNR lowest against the field's) is also written as an image: photo | field |
splats | 4 x |splats - photo|.

    python -m benchmarks.worst_views --ckpt runs/capture_splats/beer/checkpoints/latest.pt --name beer \\
        --out runs/worst_views --record benchmarks/worst_views.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import torch

from benchmarks.harness import (TRAINING_CODE, command_line, git_commit, load_average, machine, run_with_splats,
                                write_record)
from enerf.fields.appearance import fit_affine
from enerf.cameras.pinhole import Pinhole
from enerf.metrics import psnr
from enerf.render.sources import field_source
from enerf.splats.files import read_splats_into_scene
from enerf.splats.source import run_background, splat_source

DEPENDS = [*TRAINING_CODE, "enerf/splats", "benchmarks/worst_views.py"]


def sharpness(image: np.ndarray) -> float:
    """[H, W, 3] in [0, 1] -> the variance of the 4-neighbour Laplacian of its grey image (inner pixels)."""
    grey = image.mean(-1)
    lap = grey[1:-1, :-2] + grey[1:-1, 2:] + grey[:-2, 1:-1] + grey[2:, 1:-1] - 4 * grey[1:-1, 1:-1]
    return float(lap.var())


def diagnose(photo: np.ndarray, field: np.ndarray, splats: np.ndarray, acc: np.ndarray,
             background: np.ndarray, drawn_on: np.ndarray) -> dict:
    """One view's figures (the module's docstring) from [H, W, 3] images in [0, 1], the splats' [H, W] opacity,
    the [3] colour a background would take and the [3] colour the splats were drawn on."""
    hole = acc < 0.5
    error = ((splats - photo) ** 2).mean(-1)
    filled = np.clip(splats + (1 - acc)[..., None] * (background - drawn_on), 0, 1)
    matrix, offset = fit_affine(splats, photo)  # the affine appearance model's colour transform, fitted whole
    return {
        "psnr": {"field": psnr(field, photo), "splats": psnr(splats, photo)},
        "uncovered": float(hole.mean()),
        "uncovered_error": float(error[hole].sum() / max(error.sum(), 1e-12)),
        "psnr_background": psnr(filled, photo),
        "offset": [float(x) for x in (splats - photo).reshape(-1, 3).mean(0)],
        "psnr_affine": psnr(np.clip(splats @ matrix.T + offset, 0, 1), photo),
        "sharpness": {k: sharpness(v) for k, v in (("field", field), ("photo", photo), ("splats", splats))},
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--name", required=True, help="the entry's name in the record")
    parser.add_argument("--datadir", default=None)
    parser.add_argument("--out", type=Path, default=Path("runs/worst_views"), help="where the worst view's image goes")
    parser.add_argument("--record", type=Path)
    args = parser.parse_args(argv)
    load_before = load_average()
    run, path = run_with_splats(args.ckpt, args.datadir)
    scene = run.scene
    background = np.mean([scene.image(int(i)).reshape(-1, 3).mean(0) for i in scene.i_train], 0)
    gaussians = read_splats_into_scene(path, scene, run.device)[0]
    sources = {"field": field_source(scene, run.fields, run.cfg.render, run.device, run.renderer),
               "splats": splat_source(gaussians, scene, run_background(run.cfg.render))}
    views, images = [], {}
    for index in scene.i_test:
        photo = scene.image(int(index)).astype(np.float64)
        view = Pinhole(np.asarray(scene.poses[int(index)], np.float32), photo.shape[1], photo.shape[0],
                       float(scene.focal))
        with torch.no_grad():
            out = {k: src(view) for k, src in sources.items()}
        field, splats = (out[k]["rgb"].clamp(0, 1).numpy().astype(np.float64) for k in ("field", "splats"))
        entry = {"view": int(index), **diagnose(photo, field, splats, out["splats"]["acc"].numpy().astype(np.float64),
                                                background, run_background(run.cfg.render).numpy())}
        views.append(entry)
        images[int(index)] = (photo, field, splats)
        p = entry["psnr"]
        print(f"view {int(index)}: field {p['field']:.2f} dB, splats {p['splats']:.2f} dB; uncovered "
              f"{entry['uncovered']:.1%} ({entry['uncovered_error']:.0%} of the error), with a background "
              f"{entry['psnr_background']:.2f} dB, after an affine colour fit {entry['psnr_affine']:.2f} dB; "
              f"offset {', '.join(f'{x:+.3f}' for x in entry['offset'])}; sharpness field / photo / splats "
              f"{' / '.join(f'{x:.2g}' for x in entry['sharpness'].values())}", flush=True)
    worst = min(views, key=lambda v: v["psnr"]["splats"] - v["psnr"]["field"])
    photo, field, splats = images[worst["view"]]
    args.out.mkdir(parents=True, exist_ok=True)
    picture = args.out / f"{args.name}_view_{worst['view']}.png"
    strip = np.concatenate([photo, field, splats, np.clip(4 * np.abs(splats - photo), 0, 1)], 1)
    iio.imwrite(picture, (strip * 255).round().astype(np.uint8))
    entry = {"checkpoint": args.ckpt, "splats": str(path), "background": [float(x) for x in background],
             "views": views, "worst_view": worst["view"], "picture": str(picture), "command": command_line(),
             "commit": git_commit(), "load_before": load_before, "load_after": load_average()}
    if args.record:
        record = json.loads(args.record.read_text()) if args.record.is_file() else {
            "what": "why a run's splats lose to its field on a held-out view (benchmarks/worst_views.py's docstring)",
            "depends": DEPENDS, "machine": machine(), "entries": {}}
        record["entries"][args.name] = entry
        write_record(args.record, record)
    return entry


if __name__ == "__main__":
    main()
