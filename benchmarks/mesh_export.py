"""`enerf mesh --faces N --texture --out X.glb` on trained checkpoints: time, size, and what trimesh reads back.

For each ``NAME=CHECKPOINT`` it runs the command as a user would (a subprocess, wall time
measured around it, the load average beside it), then loads the file with ``trimesh.load`` and
records its faces, vertices, UV range and texture size; CPU time (user + sys) and peak memory
of the command beside the wall time, since the wall time depends on what else runs.

    python -m benchmarks.mesh_export --ckpt lego_cpu=runs/lego_cpu/checkpoints/latest.pt \\
        fox=runs/bench_proposal/fox-s0/checkpoints/latest.pt --outdir /tmp/meshes   # -> benchmarks/mesh_export.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import trimesh

from benchmarks.harness import ROOT, command_line, git_commit, load_average, machine, write_record


def summarize(rows: list[dict]) -> dict:
    """Per run: faces, vertices, the output's size in MiB and the wall time in minutes."""
    return {r["name"]: {"faces": r.get("faces"), "vertices": r.get("vertices"),
                        "mib": round(sum(r.get("files", {}).values()) / 2**20, 2), "minutes": round(r["seconds"] / 60, 1)}
            for r in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", nargs="+", required=True, help="NAME=CHECKPOINT ...")
    parser.add_argument("--outdir", type=Path, required=True, help="where the meshes go (NAME.SUFFIX)")
    parser.add_argument("--suffix", default=".glb", choices=[".glb", ".obj", ".ply"])
    parser.add_argument("--flags", default="--faces 200000 --texture", help="enerf mesh flags besides --ckpt, --out")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "mesh_export.json")
    args = parser.parse_args(argv)
    args.outdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for item in args.ckpt:
        name, _, ckpt = item.partition("=")
        mesh_path = args.outdir / f"{name}{args.suffix}"
        cmd = ["enerf", "mesh", "--ckpt", ckpt, *args.flags.split(), "--out", str(mesh_path), "--quiet"]
        load_before = load_average()
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "enerf", *cmd[1:]], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        seconds = time.perf_counter() - start
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_seconds = (cpu.ru_utime - cpu_before.ru_utime) + (cpu.ru_stime - cpu_before.ru_stime)
        row = {"name": name, "command": " ".join(cmd), "returncode": proc.returncode, "seconds": round(seconds, 1),
               "cpu_seconds": round(cpu_seconds, 1), "peak_rss_gib": round(cpu.ru_maxrss / 2**20, 2),
               "load_average_before_after": [load_before[0], load_average()[0]],
               "stdout": proc.stdout.strip().splitlines()[-2:], "stderr": proc.stderr.strip().splitlines()[-1:]}
        if proc.returncode == 0:
            files = sorted(p for p in args.outdir.iterdir() if p.stem == name)
            row["files"] = {p.name: p.stat().st_size for p in files}
            mesh = trimesh.load(mesh_path, force="mesh", process=False)
            row.update(faces=len(mesh.faces), vertices=len(mesh.vertices), visual=mesh.visual.kind)
            if mesh.visual.kind == "texture":
                uv = np.asarray(mesh.visual.uv)
                material = mesh.visual.material
                image = getattr(material, "baseColorTexture", None) or getattr(material, "image", None)
                row.update(uv_min=round(float(uv.min()), 4), uv_max=round(float(uv.max()), 4),
                           texture=list(image.size) if image is not None else None)
        rows.append(row)
        print(json.dumps(row))
    record = {"what": "enerf mesh on trained checkpoints: wall time, files and what trimesh.load reads back",
              "command": command_line(None if argv is None else ["benchmarks/mesh_export.py", *argv]),
              "machine": machine(), "commit": git_commit(), "summary": summarize(rows), "runs": rows}
    write_record(args.out, record)
    print(f"wrote {args.out}")
    return 0 if all(r["returncode"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
