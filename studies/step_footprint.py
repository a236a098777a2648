"""How much code one NeRF training step crosses: the enerf files and the types whose code runs.

Builds a run from a config (default ``configs/demo_grid.txt``, the occupancy-grid renderer, on
the embedded scene), takes two warm-up steps, then profiles one more (``cProfile``) and lists
every file under ``enerf/`` with a function that ran, and every class (from the functions'
qualified names) whose methods ran. The step is the run's ``step``.

    python -m studies.step_footprint                              # demo_grid
    python -m studies.step_footprint --config configs/fern_cpu.txt --datadir ../shared/data/nerf_llff_data/fern
    python -m studies.step_footprint --json benchmarks/step_footprint.json
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
from pathlib import Path

import enerf
from enerf.config import DATA_ROOT
from enerf.cli.train import build_train_parser, run_config_from_args
from enerf.train.nerf import prepare_run

ROOT = Path(enerf.__file__).resolve().parent


def footprint(profile: cProfile.Profile) -> tuple[list[str], list[str]]:
    """(enerf files, enerf types) of the functions in ``profile``, sorted."""
    files, types = set(), set()
    stats = pstats.Stats(profile)
    for (filename, _line, name), _ in stats.stats.items():
        path = Path(filename).resolve()
        if ROOT not in path.parents:
            continue
        files.add(str(path.relative_to(ROOT.parent)))
    for code in _codes(profile):
        path = Path(code.co_filename).resolve()
        parts = code.co_qualname.split(".")
        if ROOT in path.parents and len(parts) > 1 and parts[1] != "<locals>":  # a method: Class.name
            types.add(f"{path.stem}.{parts[0]}")
    return sorted(files), sorted(types)


def _codes(profile: cProfile.Profile):
    for entry in profile.getstats():
        if hasattr(entry.code, "co_qualname"):
            yield entry.code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/demo_grid.txt")
    parser.add_argument("--datadir", default="")
    parser.add_argument("--json", default="", help="also write the lists here")
    args = parser.parse_args(argv)
    flags = ["--config", args.config, "--basedir", tempfile.mkdtemp(), "--no_lpips"]
    if args.datadir:
        flags += ["--datadir", args.datadir]
    cfg = run_config_from_args(build_train_parser().parse_args(flags))
    task = prepare_run(cfg, DATA_ROOT)
    for step in range(2):
        task.step(step)
    profile = cProfile.Profile()
    profile.enable()
    task.step(2)
    profile.disable()
    files, types = footprint(profile)
    print(f"one training step of {args.config}: {len(files)} enerf files, {len(types)} types")
    print("files: " + ", ".join(files))
    print("types: " + ", ".join(types))
    if args.json:
        Path(args.json).write_text(json.dumps({"config": args.config, "files": files, "types": types,
                                               "n_files": len(files), "n_types": len(types)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
