"""Where the step time of a conditioned NeRF goes, against the same run without conditioning.

Two training runs of one config, ``--conditioning none`` and ``--conditioning row`` (or
``--mode``), built with the same seed, take training steps in turn in one process (order
flipped every repetition, after ``--warmup`` rounds), so both see the same machine state.
Each step is split into its phases, the same ones as ``NerfRun.step``:

* ``forward``   the task's loss terms (grid update, batch, render: every E W is computed here)
* ``backward``  zero_grad and the backward pass (gradients through E W to W)
* ``update``    the optimizer step

and each phase is timed twice: wall clock (``perf_counter``) and the CPU time of this thread
(``thread_time``). With ``--threads 1`` torch runs every CPU op, backward included, on the
calling thread, so the thread's CPU time counts the work of the step and not the time the
scheduler gave to other processes: the figure to trust on a shared machine. Reported per mode:
the median per phase; ratios are medians of the per-repetition ratios of neighbouring steps.

The loop also computes condition numbers every ``kappa_every`` steps (an SVD per layer,
outside ``NerfRun.step``); that cost is measured apart and shown per training step. So is the
conditioner alone: E W of every conditioned layer and the backward through it to W (random
upstream gradients), times the E W computations a step makes (one per forward call of a
layer: the front-to-back rounds of torch_grid make several), as a share of the none step.

``--profile_steps N`` then runs torch.profiler over N more steps of each mode (interleaved)
and lists the operators whose self CPU time per step differs most between the modes, with
their calls per step: where the extra time goes.

    python -m studies.profile_conditioning                                   # configs/demo.txt
    python -m studies.profile_conditioning --config configs/fern_cpu.txt --steps 40
    python -m studies.profile_conditioning --steps 100 -- --N_rand 1024      # extra train flags after --

Needs the config's scene under data/ (the demo scene is made there on first use).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from enerf.config import DATA_ROOT
from enerf.cli import build_train_parser, run_config_from_args
from enerf.nn.conditioning import ConditionedWeight, condition_numbers
from enerf.train.nerf import nerf_losses
from enerf.train.nerf import NerfRun, prepare_run
from enerf.train.state import set_learning_rates

from benchmarks.harness import load_average

PHASES = ("forward", "backward", "update")


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/demo.txt")
    parser.add_argument("--mode", default="row", help="the conditioning compared with none")
    parser.add_argument("--steps", type=int, default=60, help="timed steps per mode")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per mode first")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--profile_steps", type=int, default=10, help="profiled steps per mode (0: no profile)")
    parser.add_argument("--rows", type=int, default=12, help="operators listed")
    return parser.parse_args(argv[:split]), argv[split + 1:]


def make_run(config: str, mode: str, basedir: str, flags: list[str]) -> NerfRun:
    argv = ["--config", config, "--basedir", basedir, "--no_lpips", "--quiet", "--conditioning", mode, *flags]
    return prepare_run(run_config_from_args(build_train_parser().parse_args(argv)), DATA_ROOT)


def phased_step(run: NerfRun, step: int) -> dict[str, tuple[float, float, int]]:
    """One training step as ``NerfRun.step`` makes it; {phase: (wall s, thread CPU s, minor page faults)}."""
    times = {}

    def now() -> tuple[float, float, int]:
        return time.perf_counter(), time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD).ru_minflt

    clock = now()

    def lap(name: str) -> None:
        nonlocal clock
        new = now()
        times[name] = tuple(b - a for a, b in zip(clock, new))
        clock = new

    train = run.cfg.train
    set_learning_rates(run.optimizer, train, step)
    run.renderer.update(step, run.fields, run.generator)
    run.sampler.n_rays = run.rays_per_step.n_rays
    rays, target = run.sampler.sample(center_only=step < train.precrop_iters)
    out = run.renderer.render_rays(rays, run.fields, train=True, generator=run.generator)
    run.rays_per_step.record(rays.origins.shape[0], out["n_samples"], out["n_queries"], out["n_colour_skipped"])
    losses = {**nerf_losses(out, target, run.fields, train.tv_weight), **run.optimizer.penalties()}
    loss = sum(losses.values())
    lap("forward")
    run.optimizer.zero_grad(set_to_none=True)
    run.optimizer.backward(loss)
    lap("backward")
    run.optimizer.step()
    lap("update")
    return times


def paired_ratio(a: list[float], b: list[float]) -> float:
    return statistics.median(x / y for x, y in zip(a, b))


def kappa_seconds(run: NerfRun, repeats: int = 5) -> float:
    """Thread CPU seconds of one ``condition_numbers`` call on the logged field."""
    tic = time.thread_time()
    for _ in range(repeats):
        condition_numbers(run.kappa_module())
    return (time.thread_time() - tic) / repeats


def conditioner_seconds(run: NerfRun, step: int, repeats: int = 50) -> tuple[float, int]:
    """(thread CPU seconds of computing E W of every conditioned layer once and backpropagating
    a random gradient through it to W, E W computations per training step)."""
    layers = [m for f in run.fields.values() for m in f.modules()
              if isinstance(m, ConditionedWeight) and m.conditioning != "none"]
    calls = []
    hooks = [m.register_forward_pre_hook(lambda *_: calls.append(1)) for m in layers]
    phased_step(run, step)  # counts the layers' forward calls: one E W each
    for h in hooks:
        h.remove()
    if not layers:
        return 0.0, 0
    grads = [torch.randn_like(m.weight) for m in layers]
    tic = time.thread_time()
    for _ in range(repeats):
        weights = [m.conditioned_weight() for m in layers]
        torch.autograd.backward(weights, grads)
    seconds = (time.thread_time() - tic) / repeats
    run.optimizer.zero_grad(set_to_none=True)
    return seconds, len(calls) // len(layers)


def op_profile(runs: dict[str, NerfRun], step: int, n: int) -> dict[str, dict[str, tuple[float, float]]]:
    """{mode: {op: (calls per step, self CPU µs per step)}} over ``n`` steps per mode, each step
    profiled on its own and the modes interleaved (the profiler's times are wall clock)."""
    totals: dict[str, dict[str, list[float]]] = {m: defaultdict(lambda: [0.0, 0.0]) for m in runs}
    for rep in range(n):
        for mode, run in (list(runs.items())[::-1] if rep % 2 else runs.items()):
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                phased_step(run, step + rep)
            for event in prof.key_averages():
                totals[mode][event.key][0] += event.count
                totals[mode][event.key][1] += event.self_cpu_time_total
    return {m: {k: (c / n, t / n) for k, (c, t) in ops.items()} for m, ops in totals.items()}


def main(argv: list[str]) -> int:
    args, flags = parse_args(argv)
    torch.set_num_threads(args.threads)
    modes = ("none", args.mode)
    with tempfile.TemporaryDirectory() as scratch:
        runs = {mode: make_run(args.config, mode, scratch, flags) for mode in modes}
        times = {m: {p: ([], [], []) for p in (*PHASES, "step")} for m in modes}
        wall = time.perf_counter()
        for rep in range(args.warmup + args.steps):
            for mode in (modes[::-1] if rep % 2 else modes):
                t = phased_step(runs[mode], rep)
                if rep < args.warmup:
                    continue
                t["step"] = tuple(sum(t[p][k] for p in PHASES) for k in range(3))
                for phase, values in t.items():
                    for k, v in enumerate(values):
                        times[mode][phase][k].append(v)
        wall = time.perf_counter() - wall
        kappa_every = runs["none"].cfg.train.kappa_every
        kappa = {m: kappa_seconds(runs[m]) / kappa_every if kappa_every > 0 else 0.0 for m in modes}
        conditioner, per_step = conditioner_seconds(runs[args.mode], args.warmup + args.steps)
        ops = op_profile(runs, args.warmup + args.steps, args.profile_steps) if args.profile_steps else None
    load = " ".join(f"{x:.2f}" for x in load_average())
    print(f"{args.config} {' '.join(flags)}: {args.mode} vs none, {args.steps} interleaved steps each after "
          f"{args.warmup} warm-up, {args.threads} thread(s); {wall:.0f} s; load average {load}")
    print(f"\n{'phase':10s}{'none ms':>10s}{args.mode + ' ms':>10s}{'ratio':>8s}   "
          "(thread CPU time; [wall clock]; minor page faults per step none / " + args.mode + ")")
    for phase in (*PHASES, "step"):
        a, b = times[args.mode][phase], times["none"][phase]
        print(f"{phase:10s}{1e3 * statistics.median(b[1]):10.2f}{1e3 * statistics.median(a[1]):10.2f}"
              f"{paired_ratio(a[1], b[1]):8.3f}   [{1e3 * statistics.median(b[0]):.2f} {1e3 * statistics.median(a[0]):.2f} "
              f"{paired_ratio(a[0], b[0]):.3f}]  {statistics.mean(b[2]):.0f} / {statistics.mean(a[2]):.0f}")
    print(f"{'kappa':10s}{1e3 * kappa['none']:10.3f}{1e3 * kappa[args.mode]:10.3f}   per step "
          f"(condition_numbers every {kappa_every} steps)")
    with_kappa = {m: [t + kappa[m] for t in times[m]["step"][1]] for m in modes}
    print(f"{'with kappa':10s}{1e3 * statistics.median(with_kappa['none']):10.2f}"
          f"{1e3 * statistics.median(with_kappa[args.mode]):10.2f}{paired_ratio(with_kappa[args.mode], with_kappa['none']):8.3f}")
    none_step = statistics.median(times["none"]["step"][1])
    print(f"conditioner alone: E W of every {args.mode} layer and its backward {1e3 * conditioner:.3f} ms, "
          f"computed {per_step}x per step: {100 * conditioner * per_step / none_step:.2f} % of the none step")
    if ops:
        names = set(ops["none"]) | set(ops[args.mode])
        diff = sorted(names, key=lambda k: -abs(ops[args.mode].get(k, (0, 0))[1] - ops["none"].get(k, (0, 0))[1]))
        total = {m: sum(t for _, t in ops[m].values()) for m in modes}
        print(f"\nprofiler (wall clock: only meaningful on an idle machine), {args.profile_steps} steps per mode: "
              f"self CPU per step {total['none'] / 1e3:.2f} ms (none), {total[args.mode] / 1e3:.2f} ms ({args.mode}); "
              "the operators that differ most:")
        print(f"{'operator':42s}{'calls none':>11s}{'calls ' + args.mode:>11s}{'µs none':>10s}{'µs ' + args.mode:>10s}{'diff µs':>10s}")
        for k in diff[:args.rows]:
            (ca, ta), (cb, tb) = ops["none"].get(k, (0, 0)), ops[args.mode].get(k, (0, 0))
            print(f"{k[:41]:42s}{ca:11.1f}{cb:11.1f}{ta:10.1f}{tb:10.1f}{tb - ta:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
