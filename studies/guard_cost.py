"""Cost of the per-step non-finite check (FiniteGuard) against a training step of a config.

    python -m studies.guard_cost [--config configs/demo.txt] [--steps 100] [--repeats 5]

Builds the run of ``--config`` (as ``enerf train`` would), takes ``--steps`` training steps
and times each, then times ``FiniteGuard.check`` on the same fields ``--steps`` times; reports
the medians over ``--repeats`` rounds (ms) and the check's share of a step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from benchmarks.harness import ROOT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "demo.txt"))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import torch

    from enerf.cli import build_train_parser, run_config_from_args
    from enerf.train.divergence import FiniteGuard
    from enerf.train.nerf import prepare_run

    torch.set_num_threads(1)
    cfg = run_config_from_args(build_train_parser().parse_args(["--config", args.config, "--device", "cpu"]))
    run = prepare_run(cfg, ROOT / "data")
    guard = FiniteGuard(((f"{n}.{k}", p) for n, f in run.fields.items() for k, p in f.named_parameters()),
                        cfg.train.lrate)
    step_ms, check_ms, step = [], [], 0
    for _ in range(args.repeats):
        tic = time.perf_counter()
        for _ in range(args.steps):
            _, loss = run.step(step)
            step += 1
        step_ms.append((time.perf_counter() - tic) * 1e3 / args.steps)
        tic = time.perf_counter()
        for _ in range(args.steps):
            guard.check(step, loss, Path("unused"), None)
        check_ms.append((time.perf_counter() - tic) * 1e3 / args.steps)
    s, c = statistics.median(step_ms), statistics.median(check_ms)
    n_params = sum(p.numel() for p in guard.params)
    print(f"{Path(args.config).name}: training step {s:.2f} ms, non-finite check {c:.3f} ms "
          f"({100 * c / s:.2f} % of a step; {len(guard.params)} tensors, {n_params} weights; medians of "
          f"{args.repeats} x {args.steps} steps; step ms per round {[round(v, 2) for v in step_ms]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
