"""Where a training step's time goes: torch.profiler over a few steps of any train config.

    python -m studies.profile_step --threads 1 --steps 10 -- --config configs/fern_cpu.txt

Prints seconds per step (after warm-up) and the operators by self CPU time. Everything after
``--`` is passed to the ``enerf train`` parser (config file and flags); no run folder is written.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile

from enerf.config import DATA_ROOT
from enerf.cli.train import build_train_parser, run_config_from_args
from enerf.train.nerf import prepare_run


def main() -> int:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--warmup", type=int, default=5, help="steps before timing")
    parser.add_argument("--steps", type=int, default=10, help="steps timed and profiled")
    parser.add_argument("--rows", type=int, default=15, help="operators listed")
    args = parser.parse_args(argv[:split])
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        train_args = build_train_parser().parse_args([*argv[split + 1:], "--basedir", scratch])
        run = prepare_run(run_config_from_args(train_args), DATA_ROOT)
        for step in range(args.warmup):
            run.step(step)
        tic = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for step in range(args.warmup, args.warmup + args.steps):
                run.step(step)
        seconds = (time.perf_counter() - tic) / args.steps
    print(f"{seconds:.3f} s per step ({args.threads} thread(s), profiler on)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
