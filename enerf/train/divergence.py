"""Divergence: a non-finite loss, gradient or weight stops a run at the step it appears.

``FiniteGuard.check`` runs after every optimizer step: one fused reduction (``torch._foreach_norm``
over all gradients and all weights, plus the loss), so it costs the same whatever the renderer.
On the CPU it reads that sum at once; on a GPU (``guard_every``) it keeps the step's sum on the
device and reads the sums of ``every`` steps (``log_every``) in one host sync (``flush``), so the
step never waits for the GPU; the loop also flushes before every checkpoint and evaluation. Only
when a sum is not finite does it look at the tensors one by one to say what went wrong, naming the
first step whose sum was not. A diverged run raises ``DivergenceError`` before its next checkpoint,
so the last good checkpoint stays in place.

``black_level_psnr`` is the PSNR of an image that is the background colour everywhere: a model
that never learned density renders exactly that, and ``black_warning`` says so in the summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
import torch
from torch import Tensor

from ..errors import DivergenceError

__all__ = ["FiniteGuard", "guard_every", "black_level_psnr", "black_warning", "BLACK_MARGIN_DB"]

BLACK_MARGIN_DB = 1.0  # within this of the black-image PSNR, a run "stayed black"


def guard_every(params: Iterable[Tensor], log_every: int) -> int:
    """Steps between the guard's host syncs: 1 where the parameters live on the CPU (a read costs
    nothing there, and a run stops at the very step), ``log_every`` on an accelerator."""
    return max(1, int(log_every)) if any(p.device.type != "cpu" for p in params) else 1


class FiniteGuard:
    """Per-step finiteness check of the loss, the gradients and the weights of ``named_params``.

    Args:
        named_params: (name, parameter) pairs, e.g. ``field.named_parameters()`` of every field.
        lrate: the run's ``--lrate``, for the advice of the error line.
        every: steps whose sums are read in one host sync (1: each step's at once; ``guard_every``).
    """

    def __init__(self, named_params: Iterable[tuple[str, Tensor]], lrate: float, every: int = 1) -> None:
        self.named = [(name, p) for name, p in named_params if p.requires_grad]
        self.params = [p for _, p in self.named]
        self.advice = f"a lower --lrate (now {lrate:g}), e.g. {lrate / 10:g}"
        self.every = max(1, int(every))
        self.pending: list[tuple[int, Tensor, Tensor]] = []  # (step, sum, loss) not read yet

    def total(self, loss: Tensor) -> Tensor:
        """Scalar that is finite iff the loss, every gradient and every weight is: the loss plus
        the sum of the L2 norms of all gradients and weights (one fused kernel per list)."""
        with torch.no_grad():
            grads = [p.grad for p in self.params if p.grad is not None]
            total = loss.detach().sum()
            if grads:
                total = total + torch.stack(torch._foreach_norm(grads)).sum()
            if self.params:
                total = total + torch.stack(torch._foreach_norm(self.params)).sum()
        return total

    def check(self, step: int, loss: Tensor, ckpt_path: Path, saved_step: int | None) -> None:
        """After step ``step`` (1-based count of steps done): raise DivergenceError naming the step,
        what went non-finite and the checkpoint kept (``ckpt_path`` of step ``saved_step``; None:
        none yet). With ``every`` > 1 the sum waits on the device until a multiple of ``every``."""
        total = self.total(loss)
        if self.every == 1:
            if bool(torch.isfinite(total)):
                return
            self._raise(step, loss, ckpt_path, saved_step)
        self.pending.append((step, total, loss.detach()))
        if step % self.every == 0:
            self.flush(ckpt_path, saved_step)

    def flush(self, ckpt_path: Path, saved_step: int | None) -> None:
        """Read the sums not read yet in one host sync; DivergenceError naming the first step whose
        sum was not finite (``check``). Nothing to read: nothing happens."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        finite = torch.isfinite(torch.stack([total for _, total, _ in pending])).tolist()
        if all(finite):
            return
        step, _, loss = pending[finite.index(False)]
        self._raise(step, loss, ckpt_path, saved_step)

    def _raise(self, step: int, loss: Tensor, ckpt_path: Path, saved_step: int | None) -> None:
        last_good = ("no checkpoint was written" if saved_step is None
                     else f"the last good checkpoint {ckpt_path} (step {saved_step}) is kept")
        raise DivergenceError(f"training diverged at step {step}: {self.diagnose(loss)} went non-finite; "
                              f"{last_good}; try {self.advice}")

    def diagnose(self, loss: Tensor) -> str:
        """Which of loss / gradients / weights holds NaN or inf (names the first tensors)."""
        parts = []
        if not bool(torch.isfinite(loss.detach()).all()):
            parts.append(f"the loss ({float(loss.detach().sum()):g})")
        for kind, tensors in (("gradients", [(n, p.grad) for n, p in self.named if p.grad is not None]),
                              ("weights", [(n, p.detach()) for n, p in self.named])):
            bad = [n for n, t in tensors if not bool(torch.isfinite(t).all())]
            if bad:
                more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
                parts.append(f"the {kind} ({bad[0]}{more})")
        return ", ".join(parts) or "the sum of the gradient and weight norms (too large)"


def black_level_psnr(images: np.ndarray, background: float) -> float:
    """Mean over images of the PSNR of a constant ``background`` image against each.

    Args:
        images: np.ndarray  # [N, H, W, 3] in [0, 1]
    """
    mse = ((np.asarray(images, np.float64) - background) ** 2).reshape(len(images), -1).mean(axis=1)
    return float(np.mean(-10.0 * np.log10(np.maximum(mse, 1e-12))))


def black_warning(psnr: float | None, black: float, warmup_psnr: float | None, warmup_steps: int) -> str | None:
    """The summary's line for a model that renders the background colour only; None otherwise.

    ``warmup_psnr``: the best training PSNR logged in the first ``warmup_steps`` steps (None:
    none logged)."""
    if psnr is None or psnr > black + BLACK_MARGIN_DB:
        return None
    when = ""
    if warmup_psnr is not None and warmup_psnr <= black + BLACK_MARGIN_DB:
        when = f" from the warm-up (first {warmup_steps} steps) on"
    return (f"held-out PSNR {psnr:.2f} dB is at the black-image level ({black:.2f} dB, every pixel the background "
            f"colour){when}: the model learned no density; try a lower --lrate, --raw_noise_std 1 or another --seed")
