"""Page faults and time per training step, with enerf's freed-memory setting and without it.

Each run is a fresh process that builds the run of ``--config`` as ``enerf train`` does (the way
``benchmarks.step_rate`` does), takes ``--warmup`` untimed steps, then times ``--steps`` steps and reads
the kernel's counters for them (``getrusage``: minor page faults, system time). ``reuse off`` patches
``enerf.device.reuse_freed_memory`` to a no-op before the run is built (glibc's default malloc); ``on`` is
enerf as shipped. The runs alternate: for each repetition, none and row (``--conditioning``), each off
then on, the order flipped on every other repetition. One line a run; ``--record`` writes them all.

    python -m studies.page_faults --record benchmarks/page_faults.json
    python -m studies.page_faults --config '' --datadir ../shared/data/nerfstudio/fox --steps 400 \\
        --warmup 20 --conditionings none --record benchmarks/page_faults_fox.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import command_line, git_commit, load_average, machine, write_record

_CHILD = """
import json, resource, sys, tempfile, time
import torch
import enerf.device
args = json.loads(sys.argv[1])
if not args["reuse"]:
    enerf.device.reuse_freed_memory = lambda: False
from enerf.config import DATA_ROOT
from enerf.cli.train import build_train_parser, train_config
from enerf.train.nerf import prepare_run
torch.set_num_threads(2)
flags = (["--config", args["config"]] if args["config"] else []) + ["--basedir", tempfile.mkdtemp(), "--no_lpips",
         "--conditioning", args["conditioning"]] + (["--datadir", args["datadir"]] if args["datadir"] else [])
parsed = build_train_parser().parse_args(flags)
task = prepare_run(train_config(parsed)[0], DATA_ROOT)
for step in range(args["warmup"]):
    task.step(step)
before, tic = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for step in range(args["warmup"], args["warmup"] + args["steps"]):
    task.step(step)
seconds, after = time.perf_counter() - tic, resource.getrusage(resource.RUSAGE_SELF)
n = args["steps"]
print(json.dumps({"ms_per_step": 1000 * seconds / n, "minor_faults_per_step": (after.ru_minflt - before.ru_minflt) / n,
                  "system_ms_per_step": 1000 * (after.ru_stime - before.ru_stime) / n,
                  "user_ms_per_step": 1000 * (after.ru_utime - before.ru_utime) / n}))
"""


def run(spec: dict) -> dict:
    """One fresh process (``_CHILD``); its per-step figures and the load average before it."""
    load = load_average()
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the run failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return {**spec, **json.loads(done.stdout.strip().splitlines()[-1]), "load_before": load}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/demo.txt", help="'' for none (the preset, as enerf train)")
    parser.add_argument("--datadir", default="")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--conditionings", nargs="+", default=["none", "row"])
    parser.add_argument("--record", default=None)
    args = parser.parse_args(argv)
    runs = []
    for k in range(args.repeats):
        for conditioning in args.conditionings:
            for reuse in ((False, True) if k % 2 == 0 else (True, False)):
                spec = {"config": args.config, "datadir": args.datadir, "steps": args.steps, "warmup": args.warmup,
                        "conditioning": conditioning, "reuse": reuse}
                runs.append(run(spec))
                r = runs[-1]
                print(f"{conditioning} reuse {'on ' if reuse else 'off'}: {r['ms_per_step']:.1f} ms/step, "
                      f"{r['minor_faults_per_step']:,.0f} faults/step, system {r['system_ms_per_step']:.2f} ms/step "
                      f"(load before {r['load_before'][0]:.2f})", flush=True)
    record = {"what": "minor page faults, system and wall time per training step, enerf.device.reuse_freed_memory on "
                      "and off, fresh processes", "command": command_line(), "commit": git_commit(),
              "depends": ["enerf/device.py", "enerf/train", "enerf/nn", "studies/page_faults.py"],
              "machine": machine(), "runs": runs}
    if args.record:
        write_record(Path(args.record), record)
    return record


if __name__ == "__main__":
    main()
