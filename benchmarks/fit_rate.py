"""The splat fit's steps per second on 1 and on 2 threads (issue 63: both cores busy in every kernel).

A finished capture run's splats (its splats.ply, read into the run's frame) fitted to its photos with the
default ``SplatConfig`` for ``--seconds`` (``enerf.splats.bake.fit_splats``, after numba's compilation), once
per thread count (torch's and numba's threads both set). The machine must be otherwise idle; the load
averages before each fit are in the record.

    python -m benchmarks.fit_rate --name boardgame --ckpt runs/capture_splats/boardgame/checkpoints/latest.pt \\
        --record benchmarks/fit_rate.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from benchmarks.harness import command_line, git_commit, load_average, machine, run_with_splats, write_record
from enerf.config import SplatConfig
from enerf.splats.bake import fit_splats
from enerf.splats.files import read_splats_into_scene

DEPENDS = ["enerf/splats/bake.py", "enerf/splats/projection.py", "enerf/splats/rasterize.py", "enerf/splats/tiles.py",
           "enerf/splats/teacher.py", "enerf/splats/gaussians.py"]
WHAT = "steps per second of the splat fit (a run's splats fitted to its photos, default settings) on 1 and 2 threads"


def set_threads(n: int) -> None:
    """torch's and numba's thread counts."""
    torch.set_num_threads(n)
    try:
        import numba

        numba.set_num_threads(n)
    except ImportError:
        pass


def measure(ckpt: str, seconds: float, threads: list[int], datadir: str | None = None) -> dict:
    """{"splats": N, "steps_per_second": {threads: steps / s}, "load_before": {threads: [1, 5, 15 min]}}."""
    run, path = run_with_splats(ckpt, datadir)
    start = read_splats_into_scene(path, run.scene, run.device)[0]
    cfg = SplatConfig()
    rates, loads = {}, {}
    for n in threads:
        set_threads(n)
        fit_splats(run, start, cfg, 2.0, progress=False)  # compiled, caches warm
        loads[str(n)] = load_average()
        steps = fit_splats(run, start, cfg, seconds, progress=False)[1]
        rates[str(n)] = steps / seconds
        print(f"{n} thread(s): {steps} steps in {seconds:.0f} s, {rates[str(n)]:.2f} steps/s", flush=True)
    return {"splats": len(start), "steps_per_second": rates, "load_before": loads}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", required=True, help="a run's checkpoint; the run folder holds splats.ply")
    parser.add_argument("--datadir", default=None, help="the capture (default: the folder recorded at training)")
    parser.add_argument("--name", required=True, help="the record's entry")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--record", default=None)
    parser.add_argument("--baseline", action="store_true",
                        help="the entry goes under the record's 'baseline' (this script run in an earlier tree, "
                             "for comparison) instead of 'entries'")
    args = parser.parse_args(argv)
    entry = {**measure(args.ckpt, args.seconds, args.threads, args.datadir), "seconds": args.seconds, "commit": git_commit(),
             "command": command_line()}
    if args.record:
        path = Path(args.record)
        record = json.loads(path.read_text()) if path.is_file() else {"entries": {}}
        if args.baseline:
            record.setdefault("baseline", {})[args.name] = entry
        else:
            record.update({"what": WHAT, "depends": DEPENDS, "machine": machine(), "commit": git_commit()})
            record["entries"][args.name] = entry
        write_record(path, record)
    return entry


if __name__ == "__main__":
    main()
