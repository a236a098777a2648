"""The one training loop of every kind of run (NeRF: ``train/nerf.py``, shapes: ``shapes/train.py``).

A run (``TrainingRun``) brings its models, optimizer and its step (``NerfRun.step``: learning
rate, batch, forward pass, losses, backward pass, update, in one function); the loop keeps the
cadence, the same for all runs:

* the step, then the divergence guard (``FiniteGuard``; on a GPU it reads its sums every
  ``log_every`` steps and before each checkpoint and evaluation, so no step waits for the device);
* cadences: logging (``log_every``: progress bar, TensorBoard ``train/*``), condition numbers
  (``kappa_every``: ``kappa_W/*``, ``kappa_EW/*`` and ``kappa_history``), held-out evaluation
  (``eval_every``: ``history``), checkpoints (every ``ckpt_every`` steps, every
  ``ckpt_every_seconds`` of training, and one at the end);
* interruptions: Ctrl-C or SIGTERM while training lets the current step finish, writes the
  checkpoint and raises ``RunInterrupted`` (exit code 130 / 143), so ``--resume`` continues
  exactly; a second one acts at once;
* time: ``train_seconds`` counts training only (the clock pauses for evaluations and
  checkpoints), ``time_budget`` stops a run once it is spent (the progress bar then counts
  training seconds toward it, so its ETA is the budget's), and after the first few timed
  steps one line says how long the rest will take (``enerf.train.estimate``); the loop's wall
  time is ``LoopState.wall_seconds``; the step gets the run's progress (``state.training_progress``)
  for the learning rate's cooldown;
* the run folder: locked while written (``RunLock``), stale temp files removed, ``config.json``,
  ``tb/``, ``checkpoints/latest.pt``; ``--resume`` continues from the ``LoopState`` the run
  restored from that checkpoint.

Data-parallel: ``distributed.is_writer`` is the one decision whether this process writes files; the
step does its own collectives (``enerf.distributed``).
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple, Protocol

from torch import Tensor, nn
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from ..atomic import atomic_write_json, json_safe
from ..checkpoint import save_checkpoint
from ..errors import RunInterrupted
from ..distributed import any_rank, is_writer, max_over_ranks
from ..nn.conditioning import condition_numbers
from ..runfolder import RunLock, remove_stale_temp_files
from .divergence import FiniteGuard, guard_every
from .estimate import StepEstimate
from .state import training_progress
from .state import LoopState

__all__ = ["TrainingRun", "Evaluation", "StepResult", "Stopwatch", "TrainingBar", "stop_signals", "train_loop"]


@dataclass
class Evaluation:
    """One periodic evaluation, as a run reports it to the loop."""

    record: dict  # the ``history`` entry's values (the loop adds step and train_seconds first)
    scalars: dict[str, float] = field(default_factory=dict)  # TensorBoard tag -> value
    message: str = ""  # the progress bar's line after "step N: "


class TrainingRun(Protocol):
    """What a run gives the loop (``enerf.train.nerf.NerfRun``, ``enerf.shapes.train.ShapeRun``)."""

    cfg: object  # RunConfig | ShapeRunConfig: expname, to_dict(), and train.{iters, log_every, ...}
    optimizer: object  # PreconditionedOptimizer
    generator: object  # torch.Generator that draws the batches (checkpointed)
    loop: LoopState  # where the loop starts: restored from the checkpoint on --resume
    resumed: bool  # whether ``loop`` came from a checkpoint
    command: str  # the command holding the run folder's lock, e.g. "enerf train"
    final_scalar: tuple[str, str]  # (TensorBoard tag, metrics key) written after ``finish``

    def step(self, step: int, progress: float) -> "StepResult":
        """Training step ``step`` (0-based) at ``progress`` in [0, 1] through the run: learning
        rate, batch, losses, backward pass, update."""

    def named_parameters(self) -> Iterable[tuple[str, Tensor]]:
        """The trained (name, parameter) pairs, for the divergence guard."""

    def log(self, step: int, losses: dict[str, Tensor], loss: Tensor) -> tuple[dict[str, str], dict[str, float]]:
        """At a logging step: (progress bar postfix, extra TensorBoard scalars)."""

    def kappa_module(self) -> nn.Module:
        """The network whose layers' condition numbers are logged."""

    def evaluate(self, step: int) -> Evaluation:
        """A periodic held-out evaluation after ``step`` steps."""

    def checkpoint_fields(self) -> dict[str, dict]:
        """Name -> state_dict of every trained network."""

    def checkpoint_extras(self) -> dict:
        """The run's own resumable state (sampler, renderer, ...) for the checkpoint's ``extra``."""

    def finish(self, state: LoopState, out_dir: Path, ckpt_path: Path) -> dict:
        """Final evaluation after the last checkpoint; writes and returns the metrics."""


class StepResult(NamedTuple):
    losses: dict[str, Tensor]  # the named loss terms, the optimizer's penalties included
    loss: Tensor  # their sum, the value the backward pass starts from
    lr: float  # the learning rate of this step


class Stopwatch:
    """Training time in seconds: runs while the loop trains, paused (``paused()``) while it
    evaluates or writes checkpoints; starts from ``seconds`` (a resumed run's count)."""

    def __init__(self, seconds: float = 0.0) -> None:
        self._banked = seconds
        self._tic: float | None = time.perf_counter()

    @property
    def seconds(self) -> float:
        return self._banked + (time.perf_counter() - self._tic if self._tic is not None else 0.0)

    def stop(self) -> float:
        """Stop the clock; returns the seconds counted."""
        if self._tic is not None:
            self._banked += time.perf_counter() - self._tic
            self._tic = None
        return self._banked

    @contextmanager
    def paused(self) -> Iterator[None]:
        self.stop()
        try:
            yield
        finally:
            self._tic = time.perf_counter()


class TrainingBar:
    """The training progress bar: steps toward ``iters``, or, with a time budget, seconds of
    training toward ``time_budget`` (its total is the budget, its ETA the budget's remaining
    training time at the wall-clock pace so far), the step count in its postfix."""

    def __init__(self, iters: int, time_budget: float, step: int, seconds: float, desc: str, enabled: bool) -> None:
        self.budget = time_budget
        self.postfix: dict[str, str] = {}
        if time_budget > 0:
            self.bar = tqdm(total=time_budget, initial=min(seconds, time_budget), unit="s", disable=not enabled,
                            dynamic_ncols=True, desc=desc, bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s of training "
                            "[{elapsed}<{remaining}{postfix}]")
        else:
            self.bar = tqdm(total=iters, initial=step, disable=not enabled, dynamic_ncols=True, desc=desc)

    def advance(self, done: int, seconds: float) -> None:
        """After step ``done`` (1-based) with ``seconds`` of training counted."""
        if self.budget > 0:
            self.postfix["step"] = str(done)
            self.bar.set_postfix(self.postfix, refresh=False)
            self.bar.update(min(seconds, self.budget) - self.bar.n)
        else:
            self.bar.update(1)

    def set_postfix(self, **postfix: str) -> None:
        self.postfix.update(postfix)
        self.bar.set_postfix(self.postfix)

    def write(self, line: str) -> None:
        self.bar.write(line)

    def close(self) -> None:
        self.bar.close()


@contextmanager
def stop_signals() -> Iterator[list[int]]:
    """While in the block, SIGINT and SIGTERM are caught: the list yielded gets the signal's number
    and that signal's previous handler is put back (a second one acts at once). Outside the main
    thread (where handlers cannot be set) nothing is caught."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = {}

    def handler(signum, frame) -> None:
        caught.append(signum)
        signal.signal(signum, previous[signum])

    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, handler)
    try:
        yield caught
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


class _NoWriter:
    """Stands in for the SummaryWriter in a process that writes no outputs."""

    def add_scalar(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass


StepHook = Callable[[TrainingRun, int], None]


def train_loop(run: TrainingRun, out_dir: Path, ckpt_path: Path, progress: bool = True,
               on_step: StepHook | None = None) -> dict | None:
    """Lock ``out_dir``, train ``run`` from ``run.loop.step`` to its last step (or until it
    stops early), write the last checkpoint to ``ckpt_path``; returns ``run.finish``'s metrics
    (None in a process that writes no outputs: ranks other than 0).

    ``on_step(run, steps_done)``: called after every step in the process that writes outputs,
    with the training clock paused and ``run.loop.train_seconds`` the training seconds so far
    (``enerf train --viewer`` renders there); it must not change
    the run (no random numbers from the run's generators, no gradients, the batch untouched)."""
    if not is_writer():  # distributed: rank 0 holds the lock and writes
        return _train_locked(run, Path(out_dir), Path(ckpt_path), progress, on_step)
    with RunLock(out_dir, run.command):
        remove_stale_temp_files(out_dir)
        return _train_locked(run, Path(out_dir), Path(ckpt_path), progress, on_step)


def _interrupted(caught: list[int], step: int, ckpt_path: Path) -> RunInterrupted:
    signum = caught[0] if caught else signal.SIGTERM  # distributed: another rank caught it
    name = signal.Signals(signum).name
    return RunInterrupted(f"interrupted by {name} at step {step}; checkpoint written to {ckpt_path}, continue with "
                          "--resume", 128 + int(signum))


def _train_locked(run: TrainingRun, out_dir: Path, ckpt_path: Path, progress: bool,
                  on_step: StepHook | None = None) -> dict | None:
    cfg, t, state = run.cfg, run.cfg.train, run.loop
    writes = is_writer()
    if writes:
        atomic_write_json(out_dir / "config.json", cfg.to_dict())
    named = list(run.named_parameters())
    session = _Session(run=run, ckpt_path=ckpt_path, writes=writes, on_step=on_step,
                       writer=SummaryWriter(log_dir=str(out_dir / "tb")) if writes else _NoWriter(),
                       guard=FiniteGuard(named, t.lrate, every=guard_every((p for _, p in named), t.log_every)),
                       clock=Stopwatch(state.train_seconds),
                       saved_step=state.step if run.resumed else None)
    tic = time.perf_counter()
    try:
        with stop_signals() as caught:
            session.steps(caught, progress and writes)
    except RunInterrupted:
        session.writer.close()  # the scalars logged so far stay in tb/
        raise
    session.clock.stop()
    session.checkpoint(state.step)
    state.wall_seconds = time.perf_counter() - tic
    if not writes:  # distributed: rank 0 evaluates and writes metrics.json
        return None
    metrics = run.finish(state, out_dir, ckpt_path)
    tag, key = run.final_scalar
    session.writer.add_scalar(tag, metrics[key], state.step)
    session.writer.close()
    return metrics


@dataclass
class _Session:
    """What the steps of one training session share: the run, where and whether it writes, its
    divergence guard and training clock, and the step of the checkpoint on disk."""

    run: TrainingRun
    ckpt_path: Path
    writes: bool  # this process writes the run's files (``distributed.is_writer``)
    on_step: StepHook | None
    writer: SummaryWriter | _NoWriter  # TensorBoard (a no-op in a process that does not write)
    guard: FiniteGuard
    clock: Stopwatch
    saved_step: int | None  # the step of the checkpoint on disk (None: none yet)

    def checkpoint(self, step: int) -> None:
        """Write the checkpoint of ``step`` (in the process that writes; a diverged run never
        overwrites its last good checkpoint)."""
        run, state = self.run, self.run.loop
        self.guard.flush(self.ckpt_path, self.saved_step)
        state.train_seconds = self.clock.seconds
        if self.writes:
            save_checkpoint(self.ckpt_path, run.cfg, step, run.checkpoint_fields(), run.optimizer.state_dict(),
                            extra={"generator": run.generator.get_state(), "history": state.history,
                                   "train_seconds": state.train_seconds, "kappa_history": state.kappa_history,
                                   **run.checkpoint_extras()})
        self.saved_step = step

    def steps(self, caught: list[int], show: bool) -> None:
        """The steps from ``state.step`` to the last (or the time budget's end), with their cadences; a caught
        signal (``stop_signals``) writes the checkpoint after the current step and raises RunInterrupted."""
        run, state, clock = self.run, self.run.loop, self.clock
        t = run.cfg.train
        bar = TrainingBar(t.iters, t.time_budget, state.step, clock.seconds, run.cfg.expname, show)
        say = bar.write if self.writes else (lambda line: None)
        estimate = StepEstimate(t.iters, t.time_budget)  # one line, after the first few timed steps
        last_saved = clock.seconds  # training seconds at the last checkpoint (or the start)
        try:
            for step in range(state.step, t.iters):
                self.step(step, bar, say, estimate)
                done = state.step
                if done < t.iters and ((t.ckpt_every > 0 and done % t.ckpt_every == 0) or (
                        t.ckpt_every_seconds > 0 and clock.seconds - last_saved >= t.ckpt_every_seconds)):
                    with clock.paused():
                        self.checkpoint(done)
                    last_saved = clock.seconds
                if self.on_step is not None and self.writes:
                    with clock.paused():
                        state.train_seconds = clock.seconds  # what the hook reads as the training time so far
                        self.on_step(run, done)
                if any_rank(bool(caught)):  # distributed: every rank stops at the same step
                    with clock.paused():
                        self.checkpoint(done)
                    raise _interrupted(caught, done, self.ckpt_path)
                if t.time_budget > 0 and any_rank(clock.seconds >= t.time_budget):  # distributed: all stop at one step
                    say(f"time budget of {t.time_budget:.0f} s reached at step {done}")
                    break
        finally:
            bar.close()

    def step(self, step: int, bar: TrainingBar, say: Callable[[str], None], estimate: StepEstimate) -> None:
        """Step ``step`` with its logging, condition numbers and periodic evaluation (in the process
        that writes outputs)."""
        run, state, clock, writer, writes = self.run, self.run.loop, self.clock, self.writer, self.writes
        t = run.cfg.train
        progress = 0.0  # how far the run is, for the learning rate's cooldown (state.py)
        if t.lrate_cooldown > 0:  # distributed: the furthest rank's clock, so that all ranks share one rate
            progress = max_over_ranks(training_progress(step, t.iters, clock.seconds, t.time_budget))
        result = run.step(step, progress)
        done = state.step = step + 1
        self.guard.check(done, result.loss, self.ckpt_path, self.saved_step)
        bar.advance(done, clock.seconds)
        line = estimate.after_step(done, clock.seconds)
        if line:
            say(line)
        if writes and (done % t.log_every == 0 or done == t.iters):
            postfix, scalars = run.log(done, result.losses, result.loss)
            bar.set_postfix(**postfix)
            for name, value in result.losses.items():
                writer.add_scalar(f"train/{name}", value.item(), done)
            for tag, value in {**scalars, "train/lr": result.lr}.items():
                writer.add_scalar(tag, value, done)
        if writes and t.kappa_every > 0 and (done % t.kappa_every == 0 or done == 1):
            kappas = condition_numbers(run.kappa_module())
            state.kappa_history.append({"step": done, "layers": {k: json_safe(v) for k, v in kappas.items()}})
            for layer, (kappa_w, kappa_ew) in kappas.items():
                writer.add_scalar(f"kappa_W/{layer}", kappa_w, done)
                writer.add_scalar(f"kappa_EW/{layer}", kappa_ew, done)
        if t.eval_every > 0 and done % t.eval_every == 0 and done < t.iters:
            self.guard.flush(self.ckpt_path, self.saved_step)  # on every rank: all stop at the same step
        if writes and t.eval_every > 0 and done % t.eval_every == 0 and done < t.iters:
            with clock.paused():
                evaluation = run.evaluate(done)
                state.history.append({"step": done, "train_seconds": clock.seconds, **evaluation.record})
                for tag, value in evaluation.scalars.items():
                    writer.add_scalar(tag, value, done)
                say(f"step {done}: {evaluation.message}")
