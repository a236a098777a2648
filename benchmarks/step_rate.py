"""Training steps per second of a config, for comparing two trees side by side.

Builds the run of ``--config`` (as ``enerf train`` would, data included), takes ``--warmup``
untimed steps, then times ``--steps`` training steps (the run's ``step``: grid update,
batch, render, losses, backward, update) and prints steps/s. No evaluation, no files written.
Run it for two trees in turn on an otherwise idle machine, e.g.::

    for tree in ../base .; do PYTHONPATH=$tree python -m benchmarks.step_rate --config configs/demo_grid.txt; done
    python -m benchmarks.step_rate --config configs/fern_cpu.txt --datadir ../shared/data/nerf_llff_data/fern
    python -m benchmarks.step_rate --config configs/lego_cpu.txt --datadir ../shared/data/nerf_synthetic/lego

``--config ''`` builds the run as ``enerf train --datadir`` with no config does (the device's preset for the
scene); flags after ``--`` are ``enerf train`` flags added to the run, e.g. the zero-config fox with fewer samples::

    python -m benchmarks.step_rate --config '' --datadir ../shared/data/nerfstudio/fox -- --N_samples 32
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

import enerf
from enerf.config import DATA_ROOT
from enerf.cli.train import build_train_parser, train_config
from enerf.train.nerf import prepare_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/demo_grid.txt", help="'' for none (the preset, as enerf train)")
    parser.add_argument("--datadir", default="")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default="", help="append the result as one JSON line to this file")
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    torch.set_num_threads(args.threads)
    flags = (["--config", args.config] if args.config else []) + ["--basedir", tempfile.mkdtemp(), "--no_lpips"]
    if args.datadir:
        flags += ["--datadir", args.datadir]
    train_args = build_train_parser().parse_args(flags + extra)
    # as enerf train (enerf.config.resolve): the device's preset where no config file is given
    task = prepare_run(train_config(train_args)[0], DATA_ROOT)
    for step in range(args.warmup):
        task.step(step)
    tic = time.perf_counter()
    for step in range(args.warmup, args.warmup + args.steps):
        task.step(step)
    seconds = time.perf_counter() - tic
    result = {"tree": str(Path(enerf.__file__).resolve().parent.parent), "config": args.config, "flags": extra,
              "datadir": args.datadir, "threads": args.threads,
              "steps": args.steps, "seconds": seconds, "steps_per_second": args.steps / seconds}
    print(f"{args.config or 'no config'} {' '.join(extra)} ({result['tree']}): {result['steps_per_second']:.2f} steps/s "
          f"over {args.steps} steps")
    if args.json:
        with open(args.json, "a") as out:
            out.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
