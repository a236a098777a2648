"""Every export from a checkpoint alone, on the fox capture and on lego: benchmarks/exports.json.

    python -m benchmarks.exports --work runs/bench_exports \\
        --ckpt fox=runs/bench_proposal/fox-s0/checkpoints/latest.pt=../shared/data/nerfstudio/fox \\
        --ckpt lego=runs/lego_cpu/checkpoints/latest.pt

For each checkpoint: a portable copy in ``--work/<name>/checkpoints/latest.pt`` that carries its
cameras (``enerf.data.camera_record``; checkpoints trained before enerf saved them get them from their
scene folder once, here) and whose recorded scene folder is a path that does not exist (a
checkpoint on another machine). Then, in ``--work/<name>`` and timed, each command of
``EXPORTS`` (flags per scene in ``FLAGS``), and ``enerf eval`` without the folder (it must
refuse in one line, exit 2). Every output is loaded back: the PLYs in trimesh and in Open3D
(``pip install -e ".[bench]"``, or ``--open3d PATH``: a folder it was ``pip install --target``-ed
into; not checked when neither imports), the depth folder's transforms.json with enerf's nerfstudio
loader. Timings are wall seconds on the machine named in the record, with its load average before
and after.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np


from enerf.atomic import atomic_replace
from enerf.config import DATA_ROOT
from enerf.checkpoint import load_checkpoint
from enerf.data.camera_record import cameras_record
from enerf.data.loaders import load_scene

from benchmarks.harness import ROOT, Timer, load_average, machine, write_record

EXPORTS = {  # name -> enerf arguments after --ckpt C
    "depth": ["export", "depth", "--out", "depth"],
    "pointcloud": ["export", "pointcloud", "--out", "cloud.ply"],
    "mesh_tsdf": ["mesh", "--method", "tsdf", "--out", "mesh_tsdf.ply"],
}
FLAGS = {  # per scene and export: the sizes that fit a few minutes on 2 cores
    "fox": {"depth": ["--downscale", "4"], "pointcloud": ["--downscale", "4"],
            "mesh_tsdf": ["--downscale", "6", "--resolution", "192"]},
    "lego": {"depth": ["--downscale", "4"], "pointcloud": ["--downscale", "8"],
             "mesh_tsdf": ["--downscale", "10", "--resolution", "192"]},
}


def portable_copy(ckpt: Path, dst: Path, datadir: str | None) -> dict:
    """Write ``dst``: ``ckpt`` with its cameras (read from ``datadir``, else the recorded folder,
    when it has none), its scene folder recorded as a missing path."""
    payload, cfg = load_checkpoint(ckpt)
    extra = payload.setdefault("extra", {})
    if "cameras" not in extra:
        data = dataclasses.replace(cfg.data, datadir=datadir) if datadir else cfg.data
        extra["cameras"] = cameras_record(load_scene(data, DATA_ROOT, cfg.render.white_bkgd))
    payload["config"]["data"]["datadir"] = f"/nonexistent/{dst.parents[1].name}"
    atomic_replace(dst, lambda tmp: __import__("torch").save(payload, tmp))
    cams = extra["cameras"]
    return {"views": len(cams["poses"]), "train": len(cams["i_train"]), "test": len(cams["i_test"]),
            "width": cams["width"], "height": cams["height"], "ndc": cams["use_ndc"],
            "recorded_datadir": payload["config"]["data"]["datadir"]}


def run(argv: list[str], cwd: Path) -> dict:
    load = load_average()
    with Timer() as timer:
        proc = subprocess.run([sys.executable, "-m", "enerf", *argv], cwd=cwd, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})

    def lines(text: str, n: int) -> list[str]:  # the last n lines, paths relative to the repository
        return [line.replace(f"{ROOT}/", "") for line in text.strip().splitlines()[-n:]]

    return {"command": "enerf " + shlex.join(argv), "seconds": round(timer.seconds, 1), "rc": proc.returncode,
            "stdout": lines(proc.stdout, 1) or [""], "stderr": lines(proc.stderr, 2),
            "load_before": load, "load_after": load_average()}


def check_ply(path: Path, open3d: str | None) -> dict:
    import trimesh

    geom = trimesh.load(path)
    out = {"trimesh": type(geom).__name__, "vertices": int(len(geom.vertices)),
           "bounds": np.round(np.asarray(geom.bounds), 4).tolist()}
    if hasattr(geom, "faces") and len(getattr(geom, "faces", [])):
        out["faces"] = int(len(geom.faces))
        out["watertight"] = bool(geom.is_watertight)
    raw = geom.metadata.get("_ply_raw", {}).get("vertex", {}).get("data")
    if raw is not None and "nx" in raw.dtype.names:
        normals = np.stack([raw["nx"], raw["ny"], raw["nz"]], -1)
        out["unit_normals"] = float(np.mean(np.abs(np.linalg.norm(normals, axis=-1) - 1) < 1e-3))
    if open3d is not None:
        code = ("import open3d as o3d, sys, json; p = sys.argv[1]; "
                "g = o3d.io.read_triangle_mesh(p) if sys.argv[2] == 'mesh' else o3d.io.read_point_cloud(p); "
                "print(json.dumps({'open3d': o3d.__version__, 'points': len(g.vertices) if sys.argv[2] == 'mesh' else "
                "len(g.points), 'normals': bool(g.has_vertex_normals() if sys.argv[2] == 'mesh' else g.has_normals()), "
                "'colors': bool(g.has_vertex_colors() if sys.argv[2] == 'mesh' else g.has_colors())}))")
        proc = subprocess.run([sys.executable, "-c", code, str(path), "mesh" if "faces" in out else "cloud"],
                              capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": open3d} if open3d else None)
        out["open3d"] = json.loads(proc.stdout) if proc.returncode == 0 else proc.stderr.strip().splitlines()[-1:]
    return out


def check_depth(folder: Path) -> dict:
    from enerf.data.nerfstudio import load_nerfstudio

    scene = load_nerfstudio(folder, factor=1, llffhold=0, say=lambda line: None)
    meta = json.loads((folder / "transforms.json").read_text())
    hits = [float(np.mean(np.load(p) > 0)) for p in sorted(folder.glob("*_z.npy"))]
    z = np.concatenate([np.load(p)[np.load(p) > 0] for p in sorted(folder.glob("*_z.npy"))])
    return {"views": len(meta["frames"]), "loaded_by_enerf": scene.n_views, "size": [meta["w"], meta["h"]],
            "hit_fraction": round(float(np.mean(hits)), 4), "z_median": round(float(np.median(z)), 4),
            "files": len(list(folder.iterdir()))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", action="append", required=True,
                        help="NAME=PATH or NAME=PATH=SCENE_FOLDER (the folder, for a checkpoint without cameras whose "
                             "recorded folder is relative to another working directory); NAME picks FLAGS")
    parser.add_argument("--work", default="runs/bench_exports")
    parser.add_argument("--open3d", default=None, help="a folder open3d was pip-installed into (--target); "
                        "default: the environment's own open3d (the bench extra), if it imports")
    parser.add_argument("--only", nargs="*", default=list(EXPORTS), help="exports to run")
    parser.add_argument("--out", default="benchmarks/exports.json")
    args = parser.parse_args()
    open3d = args.open3d if args.open3d else ("" if importlib.util.find_spec("open3d") else None)  # None: not checked
    record_path = ROOT / args.out
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    command = "python -m benchmarks.exports " + shlex.join(sys.argv[1:])
    record.update({"what": "enerf export depth, enerf export pointcloud and enerf mesh --method tsdf from a portable "
                           "copy of each checkpoint whose recorded scene folder does not exist; each output loaded "
                           "back (trimesh, Open3D, enerf's nerfstudio loader); wall seconds", "command": command,
                   "machine": machine() + "; the load average before and after each command is in its entry"})
    for item in args.ckpt:
        name, path, *datadir = item.split("=")
        folder = Path(args.work).resolve() / name
        entry = record.setdefault("scenes", {}).setdefault(name, {})
        entry["command"] = command  # the last invocation for this scene (--only: the exports it ran)
        entry["checkpoint"] = portable_copy(Path(path), folder / "checkpoints" / "latest.pt", datadir[0] if datadir else None)
        ckpt = "checkpoints/latest.pt"
        refused = run(["eval", "--ckpt", ckpt, "--quiet"], folder)
        entry["eval_without_folder"] = {"rc": refused["rc"], "stderr": refused["stderr"]}
        for export in args.only:
            argv = EXPORTS[export][:1 if export == "mesh_tsdf" else 2] + ["--ckpt", ckpt] + \
                EXPORTS[export][1 if export == "mesh_tsdf" else 2:] + FLAGS.get(name, {}).get(export, []) + ["--quiet"]
            result = run(argv, folder)
            target = folder / EXPORTS[export][EXPORTS[export].index("--out") + 1]
            if result["rc"] == 0:
                result["output"] = check_depth(target) if export == "depth" else check_ply(target, open3d)
            entry[export] = result
            print(name, export, json.dumps(result)[:400], flush=True)
            write_record(record_path, record)
    write_record(record_path, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
