"""Cost of equilibrated weight conditioning on the NeRF MLP, measured in one run.

For one network shape and one batch of random points it times

* a training step (forward + backward + Adam step on an MSE loss against random colours)
  of a field with ``--conditioning`` (default ``row`` on the ``hidden`` layers) against the
  same field with ``none``: target ratio <= 1.05;
* inference (forward under ``no_grad``) of the folded conditioned field (``fold_module``:
  plain ``nn.Linear`` layers holding E W) against the vanilla field: target 1.00 +- 0.02;
  the unfolded conditioned field's inference is shown for reference.

Training steps, then inference passes (twice as many), are interleaved (vanilla,
conditioned, vanilla, ... with the order flipped on every other repetition) after two
warm-up rounds. Times are medians; ratios are medians of the per-repetition ratios of
neighbouring measurements, so slow drifts of a shared machine hit both sides alike.
Defaults take about 30 s on 2 idle CPU cores (about 2 minutes when other processes
compete for them); use ``--points 65536`` or more on a GPU.

On an oversubscribed CPU every OpenMP parallel region can wait a scheduler time slice
(~8 ms) for its second thread, which inflates the many small weight-sized ops of the
conditioner far beyond their cost; ``--threads 1`` or an idle machine measures the method.

    python -m studies.conditioning_cost
    python -m studies.conditioning_cost --conditioning rowcol --points 65536 --device cuda
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from enerf.config import FieldConfig

from enerf.fields.nerf import NeRFField
from enerf.nn.conditioning import fold_module

from studies.mlp_timing import add_mlp_arguments, random_batch, set_up, timed_training_step


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_mlp_arguments(parser)
    parser.add_argument("--conditioning", default="row", choices=("row", "col", "rowcol"))
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    device, sync, shape = set_up(args)

    torch.manual_seed(0)
    vanilla = NeRFField(FieldConfig(**shape)).to(device)
    cond = NeRFField(FieldConfig(**shape, conditioning=args.conditioning, conditioned_layers=args.conditioned_layers)).to(device)
    cond.load_state_dict(vanilla.state_dict())
    vanilla_eval = copy.deepcopy(vanilla).eval()  # the trained copies drift; inference uses fixed ones
    cond_eval = copy.deepcopy(cond).eval()
    folded_eval = fold_module(cond).eval()
    optimizers = {
        "none": (vanilla, torch.optim.Adam(vanilla.parameters(), lr=5e-4)),
        args.conditioning: (cond, torch.optim.Adam(cond.parameters(), lr=5e-4)),
    }

    batch = random_batch(args.points, device)

    def train_step(name: str) -> float:
        return timed_training_step(*optimizers[name], batch, sync)

    inference_fields = {"vanilla": vanilla_eval, "folded": folded_eval, "unfolded": cond_eval}

    @torch.no_grad()
    def inference(name: str) -> float:
        sync()
        tic = time.perf_counter()
        inference_fields[name](batch.x, batch.dirs)
        sync()
        return time.perf_counter() - tic

    train_times: dict[str, list[float]] = {name: [] for name in optimizers}
    infer_times: dict[str, list[float]] = {name: [] for name in inference_fields}
    wall = time.perf_counter()
    for rep in range(args.steps + 2):  # training phase
        for name in (list(optimizers)[::-1] if rep % 2 else list(optimizers)):
            t = train_step(name)
            if rep >= 2:
                train_times[name].append(t)
    for rep in range(2 * args.steps + 2):  # inference phase: cheaper, so twice the repetitions
        for name in (list(inference_fields)[::-1] if rep % 2 else list(inference_fields)):
            t = inference(name)
            if rep >= 2:
                infer_times[name].append(t)
    wall = time.perf_counter() - wall

    med = {f"train/{k}": statistics.median(v) for k, v in train_times.items()}
    med.update({f"infer/{k}": statistics.median(v) for k, v in infer_times.items()})
    label = f"{args.conditioning} ({args.conditioned_layers})"
    threads = torch.get_num_threads() if device.type == "cpu" else "-"
    print(f"NeRF MLP {args.depth}x{args.width} (view {args.width // 2}), {args.points} points, device {device}, "
          f"threads {threads}, {args.steps} train / {2 * args.steps} inference interleaved repetitions after 2 warm-up; {wall:.0f} s total")
    print()
    rows = [
        ("train step  none", med["train/none"]),
        (f"train step  {label}", med[f"train/{args.conditioning}"]),
        ("inference   vanilla", med["infer/vanilla"]),
        (f"inference   folded {label}", med["infer/folded"]),
        (f"inference   unfolded {label}", med["infer/unfolded"]),
    ]
    width = max(len(r[0]) for r in rows) + 2
    print(f"{'measure':{width}s}{'ms':>10s}{'ms/1k pts':>11s}")
    for name, seconds in rows:
        print(f"{name:{width}s}{1e3 * seconds:10.2f}{1e6 * seconds / args.points:11.3f}")
    print()
    def paired(a: list[float], b: list[float]) -> float:
        return statistics.median(x / y for x, y in zip(a, b))

    train_ratio = paired(train_times[args.conditioning], train_times["none"])
    fold_ratio = paired(infer_times["folded"], infer_times["vanilla"])
    unfolded_ratio = paired(infer_times["unfolded"], infer_times["vanilla"])
    print(f"{'ratio (median of paired)':{width}s}{'value':>10s}  target")
    print(f"{'train ' + args.conditioning + ' / none':{width}s}{train_ratio:10.3f}  <= 1.05  "
          f"{'ok' if train_ratio <= 1.05 else 'MISSED'}")
    print(f"{'inference folded / vanilla':{width}s}{fold_ratio:10.3f}  1.00 +- 0.02  "
          f"{'ok' if abs(fold_ratio - 1) <= 0.02 else 'MISSED'}")
    print(f"{'inference unfolded / vanilla':{width}s}{unfolded_ratio:10.3f}  (reference)")


if __name__ == "__main__":
    main()
