"""How long a run will take, said once after its first few timed steps.

The training loop (``enerf.train.loop``) feeds ``StepEstimate.after_step`` the steps done and its
training clock (which pauses for evaluations and checkpoints); once enough steps are timed it gets
one line back, e.g. ``about 2.61 steps/s: 6.4 min of training for the remaining 997 steps
(--iters 1000)``, and a plain warning with the flags that shorten a run when it would take more than
an hour. The first step of a process is not timed: it pays for warm-up (allocations, lazy set-up).
"""

from __future__ import annotations

__all__ = ["StepEstimate", "estimate_line", "duration_text"]

LONG_RUN_SECONDS = 3600.0  # runs projected longer than this get the warning


def duration_text(seconds: float) -> str:
    """``42 s``, ``6.4 min`` or ``211.1 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def estimate_line(rate: float, done: int, iters: int, seconds: float, time_budget: float) -> str:
    """The estimate for a run at ``rate`` steps per second of training, ``done`` of ``iters`` steps
    and ``seconds`` of training in, stopping at ``time_budget`` seconds (0: no budget)."""
    remaining = iters - done
    steps = f"{remaining:,} step{'' if remaining == 1 else 's'}"
    speed = f"{rate:.3g} steps/s" if rate >= 1 else f"{1 / rate:.3g} s per step"
    by_steps = remaining / rate
    left = max(time_budget - seconds, 0.0)
    if time_budget > 0 and left < by_steps:
        total = left
        line = (f"about {speed}: --time_budget {time_budget:g} ends the run after {duration_text(left)} more of "
                f"training, about {int(left * rate):,} of the remaining {steps} (--iters {iters})")
    else:
        total = by_steps
        budget = f", --time_budget {time_budget:g}" if time_budget > 0 else ""
        line = (f"about {speed}: {duration_text(by_steps)} of training for the remaining {steps} "
                f"(--iters {iters}{budget})")
    if total > LONG_RUN_SECONDS:
        line += "; that is more than an hour: --iters N or --time_budget SECONDS shortens it"
    return line


class StepEstimate:
    """Times the steps after a process's first one and, once ``min_steps`` of them took
    ``min_seconds`` (or one took ``slow_seconds``), returns the estimate line once."""

    def __init__(self, iters: int, time_budget: float, min_steps: int = 3, min_seconds: float = 2.0,
                 slow_seconds: float = 20.0) -> None:
        self.iters, self.time_budget = iters, time_budget
        self.min_steps, self.min_seconds, self.slow_seconds = min_steps, min_seconds, slow_seconds
        self._start: tuple[int, float] | None = None  # (steps done, clock) after the first step
        self.said = False

    def after_step(self, done: int, seconds: float) -> str | None:
        """Called after every step with the steps done so far and the training clock's seconds;
        the estimate line the first time enough steps are timed and steps remain, else None."""
        if self.said:
            return None
        if self._start is None:
            self._start = (done, seconds)
            return None
        steps, elapsed = done - self._start[0], seconds - self._start[1]
        if done >= self.iters or self.time_budget > 0 and seconds >= self.time_budget:
            self.said = True  # the run ends here: nothing to estimate
            return None
        if elapsed <= 0 or not ((steps >= self.min_steps and elapsed >= self.min_seconds)
                                or elapsed >= self.slow_seconds):
            return None
        self.said = True
        return estimate_line(steps / elapsed, done, self.iters, seconds, self.time_budget)
