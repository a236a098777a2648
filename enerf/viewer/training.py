"""``enerf train --viewer``: the viewer inside the training process, fed between steps.

The training loop calls ``TrainingViewer.on_step`` after each step with its clock paused. The
viewer then renders at most one unit of work (a preview or one finer level) for the browsers
that wait, and only while the time it has spent rendering stays below ``render_share`` of the
wall time since training began. Rendering happens here, between steps, so the networks are
never read while the optimizer writes them; it draws no random numbers from the run's
generators (no jitter: ``render_camera``), leaves the networks' modes as they were and never
sees the training batch, so a run trains the same with and without the viewer.

A browser that disconnects, or any failure of the viewer, never stops training: the error is
reported in one line and training goes on without the viewer.
"""

from __future__ import annotations

import sys
import time

from ..config import ViewerConfig
from ..loaded_run import LoadedRun
from ..runfolder import config_run_folder
from .server import Viewer

__all__ = ["TrainingViewer"]


class TrainingViewer:
    """Opens the server at once (a port in use fails before training starts); draws the run
    from its first step on."""

    def __init__(self, cfg: ViewerConfig, title: str = "enerf train") -> None:
        self.cfg = cfg
        self.viewer = Viewer(cfg, title=title)
        self.run: LoadedRun | None = None
        self.failed: str | None = None
        self._started = 0.0
        self._evaluations = 0

    @property
    def url(self) -> str:
        return self.viewer.url

    def _attach(self, task) -> None:
        cfg = task.cfg
        folder = config_run_folder(cfg)
        self.run = LoadedRun(cfg, task.loop.step, task.fields, task.renderer, folder, folder / "checkpoints" / "latest.pt",
                       task.device, {}, task.scene)
        self.viewer.attach([self.run], [{}], path_dir=folder / "camera_paths")
        self._started = time.perf_counter()

    def on_step(self, task, done: int) -> None:
        """The loop's step hook: keep the panel current, render if the time share allows."""
        if self.failed:
            return
        try:
            if self.run is None:
                self._attach(task)
            self.run.step = done
            history = task.loop.history
            if len(history) != self._evaluations and history:
                self._evaluations = len(history)
                self.viewer.metrics[0] = {"psnr": history[-1].get("psnr")}
                self.viewer.run_panels[0].content = _summary(self.run, history[-1])
            elapsed = time.perf_counter() - self._started
            if self.viewer.render_seconds <= self.cfg.render_share * elapsed and self.viewer.pending(done):
                self.viewer.work(done)
        except Exception as exc:  # the viewer is an onlooker: training goes on without it
            self.failed = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            print(f"enerf: warning: the viewer stopped ({self.failed}); training goes on", file=sys.stderr)

    def close(self) -> None:
        self.viewer.close()
        print(f"enerf train: the viewer sent {self.viewer.frames_sent} frames to {self.viewer.browsers_seen} "
              f"browser{'s' if self.viewer.browsers_seen != 1 else ''} ({self.viewer.render_seconds:.1f} s rendering)",
              flush=True)


def _summary(run: LoadedRun, evaluation: dict) -> str:
    from .scene import run_summary

    return run_summary(run, {"psnr": evaluation.get("psnr")}) + f"\n- (evaluated at step {evaluation.get('step')})"
