"""Per-training-step cost of every conditioning method and of BNP against vanilla, in one run.

For one NeRF MLP shape and one batch of random points it times a training step (forward +
backward + optimizer step on an MSE loss against random colours, through
``enerf.optim.build_optimizer`` for every variant, so the wrapper's cost is on both sides) of

    none (the reference), row, col, rowcol, wn, ws    (--conditioning on the hidden layers)
    bnp                                                (none + --precond bnp: hooks + Algorithm 2)

Targets (issue 6): wn, ws, row <= 1.05 x none; bnp <= 1.10 x none. Repetitions are
interleaved (every variant once per repetition, the order rotated each time) after two
warm-up rounds; a variant's ratio is the median over repetitions of its time divided by the
``none`` time of the same repetition, so drifts of a shared machine hit both sides alike.

    python -m studies.methods_cost                      # about 1-2 minutes on 2 idle CPU cores
    python -m studies.methods_cost --variants none row bnp --points 65536 --device cuda
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from enerf.config import FieldConfig

from enerf.fields.nerf import NeRFField
from enerf.optim import build_optimizer

from studies.mlp_timing import add_mlp_arguments, random_batch, set_up, timed_training_step


VARIANTS = ("none", "row", "col", "rowcol", "wn", "ws", "bnp")
TARGETS = {"row": 1.05, "wn": 1.05, "ws": 1.05, "bnp": 1.10}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    add_mlp_arguments(parser)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    device, sync, shape = set_up(args)
    variants = ["none"] + [v for v in args.variants if v != "none"]

    runs = {}
    for name in variants:
        torch.manual_seed(0)  # same initial weights for every variant
        conditioning = "none" if name == "bnp" else name
        field = NeRFField(FieldConfig(**shape, conditioning=conditioning, conditioned_layers=args.conditioned_layers)).to(device)
        opt = build_optimizer(field, lr=5e-4, precond="bnp" if name == "bnp" else "none")
        runs[name] = (field, opt)

    batch = random_batch(args.points, device)

    def train_step(name: str) -> float:
        field, opt = runs[name]
        return timed_training_step(field, opt, batch, sync, backward=opt.backward)

    times: dict[str, list[float]] = {name: [] for name in variants}
    wall = time.perf_counter()
    for rep in range(args.steps + 2):
        shift = rep % len(variants)
        for name in variants[shift:] + variants[:shift]:
            t = train_step(name)
            if rep >= 2:
                times[name].append(t)
    wall = time.perf_counter() - wall

    threads = torch.get_num_threads() if device.type == "cpu" else "-"
    print(f"NeRF MLP {args.depth}x{args.width} (view {args.width // 2}), {args.points} points, device {device}, "
          f"threads {threads}, conditioned layers: {args.conditioned_layers}; {args.steps} interleaved "
          f"repetitions after 2 warm-up; {wall:.0f} s total")
    print()
    print(f"{'variant':10s}{'ms/step':>10s}{'ratio':>8s}  target")
    for name in variants:
        median = statistics.median(times[name])
        ratio = statistics.median(a / b for a, b in zip(times[name], times["none"]))
        target_text = ""
        if name in TARGETS:
            target_text = f"<= {TARGETS[name]:.2f}  {'ok' if ratio <= TARGETS[name] else 'MISSED'}"
        print(f"{name:10s}{1e3 * median:10.1f}{ratio:8.3f}  {target_text}")


if __name__ == "__main__":
    main()
