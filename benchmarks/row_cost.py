"""What a ``--conditioning row`` training step costs against a vanilla one, as alternating pairs.

For each config, ``--pairs`` pairs of ``python -m benchmarks.step_rate`` runs (each a fresh process:
the run built as ``enerf train`` builds it, ``--warmup`` untimed steps, then ``--steps`` timed training
steps; no evaluation, no checkpoint), ``none`` then ``row`` in the first pair, ``row`` then ``none`` in
the next, and so on, so that a drift of the machine's speed over the benchmark falls on both. The
figure is the ratio of the median seconds per step, row over none (1.00: the same cost). The load
average is recorded before each run: the figures mean something only on an otherwise idle machine.

Configs: ``demo`` (``configs/demo.txt``, the README's first command) and ``capture`` (``enerf train
--datadir CAPTURE`` with no config: the device's capture preset, a triplane field).

    python -m benchmarks.row_cost --record benchmarks/row_cost.json
    python -m benchmarks.row_cost --configs demo --pairs 2          # a quick look, no record
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import TRAINING_CODE, command_line, git_commit, load_average, machine, write_record

DEPENDS = TRAINING_CODE + ["benchmarks/step_rate.py", "configs/demo.txt"]
CAPTURE = "../shared/data/nerfstudio/fox"
WHAT = ("seconds per training step of --conditioning row over --conditioning none (ratio of medians), alternating "
        "pairs of benchmarks.step_rate runs, each a fresh process")


def configs(capture: str) -> dict[str, dict]:
    """Name -> step_rate's arguments and step counts."""
    return {"demo": {"args": ["--config", "configs/demo.txt"], "steps": 300, "warmup": 30},
            "capture": {"args": ["--config", "", "--datadir", capture], "steps": 100, "warmup": 20}}


def step_rate(args: list[str], steps: int, warmup: int, conditioning: str) -> dict:
    """One ``benchmarks.step_rate`` run; its steps per second and the load average before it."""
    load = load_average()
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as out:
        cmd = [sys.executable, "-m", "benchmarks.step_rate", *args, "--steps", str(steps), "--warmup", str(warmup),
               "--json", out.name, "--", "--conditioning", conditioning]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"benchmarks.step_rate failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        result = json.loads(Path(out.name).read_text().splitlines()[-1])
    return {"conditioning": conditioning, "steps_per_second": result["steps_per_second"], "load_before": load}


def measure(name: str, spec: dict, pairs: int) -> dict:
    """``pairs`` alternating pairs on one config: every run, and the ratio of the median seconds per step."""
    runs = []
    for k in range(pairs):
        order = ("none", "row") if k % 2 == 0 else ("row", "none")
        for conditioning in order:
            run = step_rate(spec["args"], spec["steps"], spec["warmup"], conditioning)
            print(f"{name} pair {k + 1}/{pairs} {conditioning}: {run['steps_per_second']:.2f} steps/s "
                  f"(load before {run['load_before'][0]:.2f})", flush=True)
            runs.append(run)
    seconds = {c: statistics.median(1.0 / r["steps_per_second"] for r in runs if r["conditioning"] == c)
               for c in ("none", "row")}
    per_pair = []
    for k in range(pairs):
        rate = {r["conditioning"]: r["steps_per_second"] for r in runs[2 * k:2 * k + 2]}
        per_pair.append(round(rate["none"] / rate["row"], 3))  # seconds per step, row over none
    return {"steps": spec["steps"], "warmup": spec["warmup"], "runs": runs, "ratio_per_pair": per_pair,
            "median_seconds_per_step": seconds, "ratio_row_over_none": seconds["row"] / seconds["none"]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["demo", "capture"], choices=["demo", "capture"])
    parser.add_argument("--capture", default=CAPTURE, help="the capture folder of the capture config")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--record", default=None, help="JSON record to write")
    args = parser.parse_args(argv)
    specs = configs(args.capture)
    if "capture" in args.configs and not Path(args.capture).is_dir():
        raise SystemExit(f"{args.capture}: no such capture folder; give --capture or --configs demo")
    results = {name: measure(name, specs[name], args.pairs) for name in args.configs}
    for name, r in results.items():
        print(f"{name}: row / none = {r['ratio_row_over_none']:.3f} (per pair {r['ratio_per_pair']})")
    record = {"what": WHAT, "command": command_line(), "commit": git_commit(), "depends": DEPENDS,
              "machine": machine(), "configs": results,
              "summary": {f"{name}_ratio": round(r["ratio_row_over_none"], 3) for name, r in results.items()}}
    if args.record:
        write_record(args.record, record)
    return record


if __name__ == "__main__":
    main()
