"""Why ``row`` SDF networks die, and what keeps them trainable: short runs of the paper-sized
shape network (configs/shape_paper_cpu.txt: 8 x 256, skip at 4, 6 octaves, 2,048 points a step,
Adam at 5e-4) in SDF mode, recording every few steps

* ``in_band``: the fraction of the step's points whose prediction lies inside the clamp band
  |f| < d (DeepSDF's L1 on clamp(f, -d, d) has zero gradient outside it: a network whose
  predictions all leave the band stops learning);
* ``abs_f``: the median |f| over the batch; ``l1``: the clamped L1 loss;
* at the end, the volumetric IoU on 100,000 uniform points (sign of f against the mesh).

Variants are ``NAME=FLAG:VALUE,FLAG:VALUE`` over ShapeFieldConfig / ShapeTrainConfig fields,
e.g. ``row_lr1e-4=conditioning:row,lrate:1e-4``.

    python -m studies.sdf_band --steps 200 --seeds 0 --mesh bunny
    python -m studies.sdf_band --variants none=conditioning:none row=conditioning:row

Writes benchmarks/sdf_band.json (the command, the settings, per-variant curves and IoU).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch


from enerf.config import ShapeDataConfig, ShapeFieldConfig, ShapeTrainConfig
from enerf.shapes.samples import load_shape_data
from enerf.fields.shape import ShapeField
from enerf.metrics import volumetric_iou
from enerf.rng import seed_everything
from enerf.shapes.losses import shape_losses
from enerf.train.state import optimizer_from_config

from benchmarks.harness import ROOT, load_average, write_record

# configs/shape_paper_cpu.txt, kind sdf
PAPER = {"netdepth": 8, "netwidth": 256, "skips": (4,), "multires": 6, "kind": "sdf", "batch_size": 2048,
         "lrate": 5e-4}
DEFAULT_VARIANTS = (
    "none=conditioning:none",
    "row=conditioning:row",
    "row_vanilla_init=conditioning:row,init_weights:vanilla",
    "none_equilibrated_init=conditioning:none,init_weights:equilibrated",
    "row_lr1e-4=conditioning:row,lrate:1e-4",
    "row_lr5e-5=conditioning:row,lrate:5e-5",
    "row_clamp0.5=conditioning:row,sdf_clamp:0.5",
    "row_clamp1=conditioning:row,sdf_clamp:1.0",
    "row_eikonal0.1=conditioning:row,eikonal_weight:0.1",
)


def parse_variant(text: str) -> tuple[str, dict]:
    name, _, body = text.partition("=")
    settings = {}
    for item in filter(None, body.split(",")):
        key, _, value = item.partition(":")
        settings[key] = value
    return name, settings


def build(settings: dict, seed: int) -> tuple[ShapeFieldConfig, ShapeTrainConfig]:
    field_keys = {f for f in ShapeFieldConfig.__dataclass_fields__}
    field_values = {k: v for k, v in PAPER.items() if k in field_keys}
    train_values = {k: v for k, v in PAPER.items() if k not in field_keys}
    for key, value in settings.items():
        target = field_values if key in field_keys else train_values
        target[key] = value if key in ("conditioning", "init_weights", "optimizer", "precond") else float(value)
    return ShapeFieldConfig(**field_values), ShapeTrainConfig(**train_values, seed=seed)


def run(settings: dict, seed: int, data, steps: int, every: int) -> dict:
    field_cfg, train = build(settings, seed)
    generator = seed_everything(seed)
    field = ShapeField(field_cfg)
    optimizer = optimizer_from_config(field, train)
    points = torch.from_numpy(data.train.points.copy())
    occupancy = torch.from_numpy(data.train.occupancy.copy())
    sdf = torch.from_numpy(data.train.sdf.copy())
    d = train.sdf_clamp
    curve = []
    for step in range(steps + 1):
        idx = torch.randint(len(points), (train.batch_size,), generator=generator)
        if step % every == 0 or step == steps:
            with torch.no_grad():
                f = field(points[idx])
            curve.append({"step": step, "in_band": float((f.abs() < d).float().mean()),
                          "abs_f": float(f.abs().median()),
                          "l1": float((f.clamp(-d, d) - sdf[idx].clamp(-d, d)).abs().mean())})
        if step == steps:
            break
        losses = shape_losses(field, points[idx], occupancy[idx], sdf[idx], d, train.eikonal_weight)
        optimizer.zero_grad(set_to_none=True)
        optimizer.backward(sum(losses.values()))
        optimizer.step()
    with torch.no_grad():
        inside = torch.cat([field(torch.tensor(chunk, dtype=torch.float32)) < 0
                            for chunk in np.array_split(data.evaluation.points, 10)]).numpy()
    iou = volumetric_iou(inside, data.evaluation.occupancy > 0.5)
    return {"curve": curve, "iou": iou}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--mesh", default="bunny")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "sdf_band.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    data = load_shape_data(ShapeDataConfig(mesh=args.mesh), 100_000)
    results = {}
    loads = []
    for text in args.variants:
        name, settings = parse_variant(text)
        results[name] = {"settings": settings, "seeds": {}}
        for seed in args.seeds:
            tic = time.perf_counter()
            r = run(settings, seed, data, args.steps, args.every)
            loads.append(load_average()[0])
            results[name]["seeds"][str(seed)] = r
            band = [c["in_band"] for c in r["curve"]]
            print(f"{name} s{seed}: in-band at step 0 {band[0]:.3f}, 50 {r['curve'][min(5, len(band) - 1)]['in_band']:.3f}, "
                  f"end {band[-1]:.3f}; IoU {r['iou']:.4f} ({time.perf_counter() - tic:.0f} s)", flush=True)
        out = {
            "what": "SDF shape network (configs/shape_paper_cpu.txt, kind sdf) on " + args.mesh + ": fraction of each "
                    "step's points predicted inside the clamp band |f| < sdf_clamp, median |f|, clamped L1; final IoU",
            "command": "python -m studies.sdf_band " + " ".join(argv if argv is not None else sys.argv[1:]),
            "settings": {**PAPER, "steps": args.steps, "mesh": args.mesh},
            "load_1min": loads,
            "variants": results,
        }
        write_record(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
