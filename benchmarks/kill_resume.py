"""kill -9 at random moments during a tiny training run; resume; compare with an uninterrupted run.

    python -m benchmarks.kill_resume [--trials 20] [--seed 0] [--iters 10] [--out /tmp/kill_resume]

Every run is a child forked from this process after it imported enerf (start-up paid once),
running ``enerf.cli.main``; SIGKILL ends it as ``kill -9`` would. One uninterrupted run
(``ref``) is trained first and timed. Each trial starts the same run in
its own folder and sends SIGKILL after a random delay, drawn uniformly over the reference's
time from taking the run folder's lock (``RunLock``, just before the first step) to its end, so
kills land in training steps, checkpoint writes (every step writes one, ``--ckpt_every 1``) and
the final evaluation; it kills the resumed run again with probability 1/3,
then resumes until it finishes (``--resume`` when a checkpoint exists, else a fresh start).
A trial passes when the final checkpoint's weights and optimizer state are bit-identical to
the reference's, its step count matches, every checkpoint the kills left behind loaded, and
no ``.*.tmp`` file is left in the run folder. Prints one line per trial and a summary; exits 1
when any trial fails.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import time
from pathlib import Path

import torch

from benchmarks.harness import write_record

TINY = ["--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "32", "--view_width", "16",
        "--multires", "4", "--multires_views", "2", "--N_samples", "16", "--N_rand", "128", "--log_every", "5",
        "--kappa_every", "10", "--no_lpips", "--quiet", "--device", "cpu", "--ckpt_every", "1"]


def _cmd(scene: Path, basedir: Path, expname: str, iters: int, resume: bool) -> list[str]:
    return ["train", "--datadir", str(scene), "--basedir", str(basedir), "--expname", expname,
            "--iters", str(iters), *TINY, *(["--resume"] if resume else [])]


def _spawn(argv: list[str]) -> int:
    """Fork a child that runs ``enerf.cli.main(argv)`` (imports already done in this parent, so a
    child starts in milliseconds) with its output discarded; returns its pid."""
    from enerf.cli import main as cli_main

    pid = os.fork()
    if pid == 0:  # child
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        code = 1
        try:
            code = cli_main(argv)
        finally:
            os._exit(code)
    return pid


def _holds_lock(run: Path, pid: int) -> bool:
    """True once ``pid`` holds the run folder's lock (it writes its pid there, then trains)."""
    try:
        return (run / ".lock").read_text().startswith(f"process {pid} ")
    except OSError:
        return False


def _wait(pid: int, timeout: float | None) -> int | None:
    """Wait for ``pid`` up to ``timeout`` s (None: no limit); its exit code, or None if still running."""
    tic = time.perf_counter()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if timeout is not None and time.perf_counter() - tic >= timeout:
            return None
        time.sleep(0.002)


def _run(argv: list[str], run: Path, kill_after: float | None) -> tuple[int, float]:
    """Run ``argv`` (training into ``run``); SIGKILL it ``kill_after`` seconds after it took the run
    folder's lock (None: let it finish). Returns (exit code, seconds from the lock to the end)."""
    pid = _spawn(argv)
    while not _holds_lock(run, pid):
        rc = _wait(pid, 0.0)
        if rc is not None:  # ended before training (cannot happen with valid flags)
            raise SystemExit(f"run {' '.join(argv)} ended before it trained (exit code {rc})")
    tic = time.perf_counter()
    rc = _wait(pid, kill_after)
    if rc is None:
        os.kill(pid, signal.SIGKILL)
        rc = _wait(pid, None)
    if kill_after is None and rc != 0:
        raise SystemExit(f"run {' '.join(argv)} failed with exit code {rc}")
    return rc, time.perf_counter() - tic


def _state(ckpt: Path) -> tuple[int, dict, dict]:
    payload = torch.load(ckpt, map_location="cpu", weights_only=False)
    return payload["step"], payload["fields"], payload["optimizer"]


def _identical(a, b) -> bool:
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b))
    return a == b


def trial(k: int, rng: random.Random, scene: Path, base: Path, iters: int, window: tuple[float, float], ref) -> dict:
    """Kill the run once (twice with probability 1/3) at a moment drawn uniformly in ``window``
    (seconds after its start), resume it to the end, compare with ``ref``."""
    run = base / f"t{k:02d}"
    ckpt = run / "checkpoints" / "latest.pt"
    kills, loaded, left = [rng.uniform(*window)], 0, set()

    def after_kill() -> bool:
        """Record the temp files the kill left; load its checkpoint (it must load). True: one exists."""
        nonlocal loaded
        left.update(str(p.relative_to(run)) for p in run.rglob(".*.tmp"))
        if ckpt.is_file():
            _state(ckpt)
            loaded += 1
        return ckpt.is_file()

    rc, _ = _run(_cmd(scene, base, run.name, iters, False), run, kills[0])
    if rng.random() < 1 / 3 and rc != 0:
        kills.append(rng.uniform(*window))
        rc, _ = _run(_cmd(scene, base, run.name, iters, after_kill()), run, kills[-1])
    if rc != 0:
        _run(_cmd(scene, base, run.name, iters, after_kill()), run, None)
    step, models, optim = _state(ckpt)
    temps = [str(p.relative_to(run)) for p in run.rglob(".*.tmp")]
    ok = step == ref[0] and _identical(models, ref[1]) and _identical(optim, ref[2]) and not temps
    return {"trial": k, "kills_s": [round(t, 2) for t in kills], "checkpoints_loaded": loaded, "step": step,
            "identical": ok, "temp_files_left_by_kills": sorted(left), "temp_files": temps}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--out", default="/tmp/kill_resume")
    args = parser.parse_args()
    torch.set_num_threads(1)
    import enerf.train.nerf  # noqa: F401  (imported once here; every forked run starts with it)
    from enerf.synthetic.scene import make_synthetic_scene

    base = Path(args.out)
    shutil.rmtree(base, ignore_errors=True)
    scene = make_synthetic_scene(base / "scene", n_views=8, width=24, height=18, seed=1)
    _, train_wall = _run(_cmd(scene, base, "ref", args.iters, False), base / "ref", None)
    ref = _state(base / "ref" / "checkpoints" / "latest.pt")
    window = (0.0, train_wall)
    print(f"reference: {args.iters} steps, checkpoint every step, {train_wall:.2f} s from taking the run folder's "
          f"lock to the end; kills drawn uniformly in [0, {train_wall:.2f}] s after the lock")
    rng = random.Random(args.seed)
    results = []
    for k in range(args.trials):
        r = trial(k, rng, scene, base, args.iters, window, ref)
        results.append(r)
        print(f"trial {k:2d}: killed {r['kills_s']} s after the lock, {r['checkpoints_loaded']} leftover checkpoint(s) loaded, "
              f"{len(r['temp_files_left_by_kills'])} temp file(s) left by the kills, "
              f"{'bit-identical' if r['identical'] else 'DIFFERENT'}, temp files at the end: {len(r['temp_files'])}")
    passed = sum(r["identical"] for r in results)
    summary = {"trials": args.trials, "passed": passed, "seed": args.seed, "iters": args.iters,
               "reference_train_wall_s": train_wall, "kills": sum(len(r["kills_s"]) for r in results),
               "temp_files_left_by_kills": sum(len(r["temp_files_left_by_kills"]) for r in results),
               "results": results}
    write_record(base / "summary.json", summary)
    print(f"{passed}/{args.trials} trials bit-identical to the uninterrupted run, no temp file left at the end; "
          f"{summary['kills']} kills in all, which left {summary['temp_files_left_by_kills']} temp file(s) that the "
          f"resumes removed -> {base / 'summary.json'}" if passed == args.trials else
          f"{passed}/{args.trials} trials passed -> {base / 'summary.json'}")
    return 0 if passed == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
