"""Geometric accuracy of every `enerf mesh` method on the synthetic scene, whose surfaces are known
in closed form.

Writes the embedded synthetic scene (``enerf data synth``'s defaults: 24 views of 1008 x 756),
trains ``configs/demo_grid.txt`` on it (``--iters`` steps, 800 by default; a checkpoint already in
``--work`` is reused), and extracts a
mesh with each method:

* ``density``          marching cubes of the density at ``--threshold`` (today's default)
* ``density --faces N`` the same, simplified to N faces (quadric decimation)
* ``tsdf`` (and ``tsdf --faces N``) when ``MeshConfig`` has a ``method`` field naming it: the
  fusion of rendered depth of the training views (enerf.export.tsdf)

and scores it against the analytic surfaces (``enerf.metrics.reference_metrics``):

* the reference is what the training cameras saw: the first hits of rays through a grid of
  pixels (every ``--stride``-th pixel of each training view, traced exactly), with the analytic
  normals there;
* the mesh's area-uniform samples are kept where some training camera sees them (inside its
  image, in front of it); nothing outside every view is constrained by the photos;
* accuracy (mesh -> truth, exact closed-form distance), completeness (truth -> mesh, exact
  point-to-triangle distance), Chamfer-L1 (their mean), normal consistency (mean |cos|, both
  ways), F-score at ``--tau`` world units. The scene spans depths 2.5 to 10; its balls have
  radii 1 and 1.3.

The density grid and the fused TSDF surface are computed once and shared by the variants of
their method (the same values ``enerf mesh`` would compute again for each); a variant's
``seconds`` is then what follows them (decimation, colours), the shared part is recorded apart. Records the load average
beside the times.

    python -m benchmarks.mesh_accuracy                         # -> benchmarks/mesh_accuracy.json
    python -m benchmarks.mesh_accuracy --iters 300 --resolution 96 --out /tmp/m.json   # a quick look
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from enerf.cli import main as enerf_main
from enerf.config import DATA_ROOT, MeshConfig
from enerf.synthetic.surface_distance import surface_closest
from enerf.errors import EnerfError
from enerf.synthetic.scene import geometry_from_dict, make_synthetic_scene, trace_rays
from enerf.export import nerf_mesh
from enerf.loaded_run import load_run
from enerf.metrics import reference_metrics

from benchmarks.harness import ROOT, TRAINING_CODE, git_commit, load_average, machine, write_record


# what the figures depend on (benchmarks/pages: a later commit to these makes the record stale)
DEPENDS = TRAINING_CODE + ["enerf/export", "enerf/synthetic", "configs/demo_grid.txt", "benchmarks/mesh_accuracy.py"]

def camera_rays(c2w: np.ndarray, height: int, width: int, focal: float, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Rays through every ``stride``-th pixel centre of a camera ([right, up, back, t] columns)."""
    j, i = np.mgrid[stride // 2 : height : stride, stride // 2 : width : stride]
    dirs = np.stack([(i + 0.5 - 0.5 * width) / focal, -(j + 0.5 - 0.5 * height) / focal, -np.ones(i.shape)], -1)
    dirs = dirs.reshape(-1, 3) @ c2w[:3, :3].T
    return np.broadcast_to(c2w[:3, 3], dirs.shape).copy(), dirs


def seen_surface(meta: dict, views: list[int], stride: int, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` first hits of the views' pixel rays (world frame) and the analytic normals there."""
    geometry = geometry_from_dict(meta["geometry"])
    cam = meta["camera"]
    points = []
    for k in views:
        o, d = camera_rays(np.asarray(meta["c2w"][k]), cam["height"], cam["width"], cam["focal"], stride)
        _, t = trace_rays(geometry, o, d)
        hit = np.isfinite(t)
        points.append(o[hit] + t[hit, None] * d[hit])
    points = np.concatenate(points)
    pick = np.random.default_rng(seed).choice(len(points), size=min(count, len(points)), replace=False)
    points = points[pick]
    _, normals = surface_closest(meta["geometry"], points)
    return points, normals


def in_some_view(meta: dict, views: list[int]):
    """points [n, 3] -> bool [n]: inside the image of at least one of the views, in front of it."""
    cam = meta["camera"]

    def region(points: np.ndarray) -> np.ndarray:
        seen = np.zeros(len(points), bool)
        for k in views:
            c2w = np.asarray(meta["c2w"][k])
            local = (points - c2w[:3, 3]) @ c2w[:3, :3]  # [right, up, back] coordinates
            depth = -local[:, 2]
            with np.errstate(divide="ignore", invalid="ignore"):
                x = cam["focal"] * local[:, 0] / depth + 0.5 * cam["width"]
                y = -cam["focal"] * local[:, 1] / depth + 0.5 * cam["height"]
            seen |= (depth > 0) & (x >= 0) & (x <= cam["width"]) & (y >= 0) & (y <= cam["height"])
        return seen

    return region


class Memo:
    """``module.name`` computed once per distinct key of its arguments, then reused (the density
    grid, the fused TSDF surface): the variants of one method differ only after it."""

    def __init__(self, module, name: str, key) -> None:
        self.module, self.name, self.key = module, name, key
        self.original = getattr(module, name)
        self.values: dict = {}
        self.seconds: dict = {}

    def __call__(self, *args, **kwargs):
        key = self.key(*args, **kwargs)
        if key not in self.values:
            start = time.perf_counter()
            self.values[key] = self.original(*args, **kwargs)
            self.seconds[key] = time.perf_counter() - start
        return self.values[key]

    def __enter__(self) -> "Memo":
        setattr(self.module, self.name, self)
        return self

    def __exit__(self, *exc) -> None:
        setattr(self.module, self.name, self.original)


def _box_key(lo, hi) -> tuple:
    return tuple(np.round(np.asarray(lo, float), 9)), tuple(np.round(np.asarray(hi, float), 9))


def methods(faces: list[int]) -> list[tuple[str, dict]]:
    """(name, MeshConfig overrides) of every method to score; tsdf only where MeshConfig has it."""
    out = [("density", {})] + [(f"density --faces {n}", {"faces": n}) for n in faces]
    names = {f.name for f in dataclasses.fields(MeshConfig)}
    if "method" in names:  # the TSDF fusion (enerf.export.tsdf), where present
        out += [("tsdf", {"method": "tsdf"})] + [(f"tsdf --faces {n}", {"method": "tsdf", "faces": n}) for n in faces]
    return out


def summarize(rows: list[dict]) -> dict:
    """The best method by each score (Chamfer-L1 and accuracy / completeness lowest, normal
    consistency and F-score highest) and its value."""
    out = {}
    for key, best in (("chamfer_l1", min), ("accuracy", min), ("completeness", min),
                      ("normal_consistency", max), ("fscore", max)):
        row = best((r for r in rows if "error" not in r), key=lambda r: r[key])
        out[key] = {"method": row["method"], "value": row[key]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "bench_mesh_accuracy", help="scene and run folder")
    parser.add_argument("--config", default=str(ROOT / "configs" / "demo_grid.txt"))
    parser.add_argument("--iters", type=int, default=800)
    parser.add_argument("--resolution", type=int, default=256, help="mesh grid points per axis")
    parser.add_argument("--threshold", type=float, default=MeshConfig().threshold, help="density iso-level")
    parser.add_argument("--faces", type=int, nargs="*", default=[100000, 20000, 5000])
    parser.add_argument("--stride", type=int, default=8, help="reference: every stride-th pixel of each training view")
    parser.add_argument("--points", type=int, default=50000, help="reference points and mesh samples")
    parser.add_argument("--tau", type=float, default=0.05, help="F-score distance (world units)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "mesh_accuracy.json")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.mesh_accuracy " + " ".join(argv if argv is not None else sys.argv[1:])
    torch.set_num_threads(max(1, os.cpu_count() or 1))

    load = {"start": load_average()}
    scene_dir = make_synthetic_scene(args.work / "scene")
    ckpt = args.work / "runs" / "demo" / "checkpoints" / "latest.pt"
    train_seconds = None
    if not ckpt.is_file():
        start = time.perf_counter()
        rc = enerf_main(["train", "--config", args.config, "--datadir", str(scene_dir), "--basedir",
                         str(args.work / "runs"), "--expname", "demo", "--iters", str(args.iters), "--eval_every", "0",
                         "--kappa_every", "0", "--quiet", "--device", "cpu"])
        if rc != 0:
            return rc
        train_seconds = time.perf_counter() - start
    load["after_training"] = load_average()
    run = load_run(ckpt, DATA_ROOT, "cpu", task="nerf")
    meta = json.loads((scene_dir / "scene.json").read_text())
    views = [int(k) for k in run.scene.i_train]
    gt_points, gt_normals = seen_surface(meta, views, args.stride, args.points, seed=0)
    region = in_some_view(meta, views)

    def gt_closest(points):
        return surface_closest(meta["geometry"], points)

    from enerf.export import tsdf

    grid = Memo(nerf_mesh, "query_grid", lambda fn, lo, hi, res, *a, **k: (*_box_key(lo, hi), res))
    fused = Memo(tsdf, "tsdf_surface", lambda run, lo, hi, cfg, *a, **k: (*_box_key(lo, hi), cfg.resolution))
    rows = []
    with grid, fused:
        for name, overrides in methods(args.faces):
            cfg = MeshConfig(resolution=args.resolution, threshold=args.threshold, **overrides)
            start = time.perf_counter()
            try:
                mesh = nerf_mesh.mesh_from_run(run, cfg)
            except EnerfError as err:  # e.g. a face count the decimation cannot reach
                rows.append({"method": name, "error": str(err)})
                print(json.dumps(rows[-1]), flush=True)
                continue
            seconds = time.perf_counter() - start
            scores = reference_metrics(mesh, gt_points, gt_normals, gt_closest, n_points=args.points, tau=args.tau,
                                       region=region)
            rows.append({"method": name, "faces": len(mesh.faces), "vertices": len(mesh.vertices),
                         "seconds": round(seconds, 2), **{k: round(v, 5) for k, v in scores.items()}})
            print(json.dumps(rows[-1]), flush=True)
    load["end"] = load_average()
    record = {
        "what": "geometric accuracy of the enerf mesh methods on the synthetic scene (surfaces known in closed form), "
                "after a short training run; reference: first hits of every stride-th pixel ray of the training views; "
                "mesh samples kept where a training camera sees them",
        "command": command, "depends": DEPENDS,
        "machine": machine(), "commit": git_commit(),
        "load_average_1_5_15": load,
        "settings": {"iters": args.iters, "config": Path(args.config).name, "resolution": args.resolution,
                     "threshold": args.threshold, "stride": args.stride, "points": args.points,
                     "tau": args.tau, "training_views": len(views), "reference_points": len(gt_points)},
        "steps_trained": run.step,
        "train_seconds": None if train_seconds is None else round(train_seconds, 1),
        "density_grid_seconds": [round(t, 1) for t in grid.seconds.values()],
        "tsdf_fusion_seconds": [round(t, 1) for t in fused.seconds.values()],
        "summary": summarize(rows),
        "methods": rows,
        "tsdf": "present" if any(r["method"].startswith("tsdf") for r in rows) else
                "absent: MeshConfig has no method field on this branch; rerun once enerf mesh --method tsdf exists",
    }
    metrics = args.work / "runs" / "demo" / "metrics.json"  # the training run's final held-out evaluation
    record["heldout_psnr"] = round(json.loads(metrics.read_text())["psnr"], 2) if metrics.is_file() else None
    write_record(args.out, record)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
