"""Training steps per second of one run on 1 and on N processes (``enerf.distributed``).

Every process count trains the same run (``--config``, default ``configs/demo.txt``; the global
ray batch ``N_rand`` is the same for all, each of N ranks renders N_rand / N rays) for
``--warmup`` untimed steps, then ``--steps`` timed ones between two barriers; the figure is
steps / seconds on rank 0. Processes are started with torch.multiprocessing (gloo on CPU; on
CUDA, NCCL with one GPU per rank, so N is at most the number of GPUs). Each process uses
``--threads`` torch threads (default: cores // N), so the counts compete for the same cores.

On a machine with C cores, N processes can at best split the rendering work of one step N
ways, and only when N <= C; they add an all-reduce of every gradient (and of BNP's statistics)
per step. With 2 cores that other programs share, 2 processes cannot be expected to beat 1 by
much; the figure says what the overhead costs there. Wall-clock figures mean something only on
a quiet machine; in this project: ``flock /tmp/enerf-cpu.lock python -m benchmarks.distributed``.

    python -m benchmarks.distributed                              # demo config, 1 and 2 processes
    python -m benchmarks.distributed --nprocs 1 2 --steps 40 --repeats 3 --out bench_distributed.json
    python -m benchmarks.distributed --device cuda --nprocs 1      # a GPU machine
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


from enerf.config import DATA_ROOT
from enerf.cli.train import build_train_parser, run_config_from_args
from enerf.distributed import process_group
from enerf.train.nerf import prepare_run

from benchmarks.harness import command_line, git_commit, machine, write_record


def _worker(rank: int, nprocs: int, port: int, argv: list[str], warmup: int, steps: int, threads: int,
            result: Path) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nprocs), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), OMP_NUM_THREADS=str(threads))
    torch.set_num_threads(threads)
    cfg = run_config_from_args(build_train_parser().parse_args(argv))
    with process_group(cfg.train.device, 600.0):
        run = prepare_run(cfg, DATA_ROOT)
        for step in range(warmup):
            run.step(step)
        sync = (lambda: dist.barrier()) if nprocs > 1 else (lambda: None)
        cuda = run.device.type == "cuda"
        sync()
        torch.cuda.synchronize() if cuda else None
        tic = time.perf_counter()
        for step in range(warmup, warmup + steps):
            run.step(step)
        torch.cuda.synchronize() if cuda else None
        sync()
        seconds = time.perf_counter() - tic
    if rank == 0:
        result.write_text(json.dumps({"seconds": seconds, "rays_per_step": run.rays_per_step.rays_per_step}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(nprocs: int, argv: list[str], warmup: int, steps: int, threads: int, tmp: Path) -> dict:
    """One timed stretch on ``nprocs`` processes: {"seconds", "rays_per_step"} of rank 0."""
    result = tmp / f"bench_{nprocs}.json"
    result.unlink(missing_ok=True)
    mp.start_processes(_worker, args=(nprocs, _free_port(), argv, warmup, steps, threads, result), nprocs=nprocs,
                       start_method="spawn")
    return json.loads(result.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/demo.txt")
    parser.add_argument("--nprocs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3, help="timed stretches per process count, interleaved")
    parser.add_argument("--threads", type=int, default=0, help="torch threads per process (0: cores // N)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default="", help="also write the figures to this JSON file")
    parser.add_argument("flags", nargs="*", help="more enerf train flags (after --)")
    args = parser.parse_args()
    argv = ["--config", args.config, "--device", args.device, "--quiet", *args.flags]
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_distributed_{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    times: dict[int, list[float]] = {n: [] for n in args.nprocs}
    rays = {}
    for _ in range(args.repeats):  # interleaved, so a drifting machine affects every count alike
        for n in args.nprocs:
            threads = args.threads or max(1, cores // n)
            got = measure(n, argv, args.warmup, args.steps, threads, tmp)
            times[n].append(args.steps / got["seconds"])
            rays[n] = got["rays_per_step"]
    rows = {n: {"steps_per_s_median": statistics.median(v), "steps_per_s": v, "rays_per_step": rays[n],
                "threads_per_process": args.threads or max(1, cores // n)} for n, v in times.items()}
    print(f"{args.config} on {args.device} ({cores} cores), {args.steps} timed steps x {args.repeats}:")
    base = rows[args.nprocs[0]]["steps_per_s_median"]
    for n, row in rows.items():
        spread = f"{min(row['steps_per_s']):.2f}-{max(row['steps_per_s']):.2f}"
        print(f"  {n} process(es): {row['steps_per_s_median']:.2f} steps/s (range {spread}), "
              f"x{row['steps_per_s_median'] / base:.2f} of {args.nprocs[0]}")
    if args.out:
        write_record(args.out, {"command": command_line(), "machine": machine(args.device), "commit": git_commit(),
                                "config": args.config, "device": args.device, "cores": cores, "argv": argv,
                                "results": rows})


if __name__ == "__main__":
    main()
