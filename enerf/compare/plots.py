"""Plots of a comparison (matplotlib, Agg canvas; nothing touches pyplot's global state).

* ``curves_figure``: held-out metric vs step and vs training time per scene, one line per mode,
  a ±std band over seeds.
* ``side_by_side_figure``: one held-out view per scene: ground truth, each mode, error maps.
* ``conditioning_figure``: per-layer κ(W) (solid) and κ(EW) (dashed) over training, per mode.

Every figure is rendered to PNG bytes; the caller writes them atomically.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["figure_png", "align_curves", "curves_figure", "side_by_side_figure", "conditioning_figure"]


def figure_png(fig: Figure, dpi: int = 110) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def align_curves(histories: Sequence[list[dict]], key: str) -> tuple[np.ndarray, np.ndarray]:
    """Values of ``key`` at the steps every history has.

    Returns:
        steps: np.ndarray  # [T]
        values: np.ndarray  # [n_histories, T]
    """
    tables = [{int(h["step"]): float(h[key]) for h in hist if h.get(key) is not None} for hist in histories]
    common = sorted(set.intersection(*(set(t) for t in tables))) if tables else []
    return np.asarray(common, dtype=np.int64), np.asarray([[t[s] for s in common] for t in tables], dtype=np.float64)


def curves_figure(curves: dict[str, dict[str, list[list[dict]]]], key: str, label: str) -> Figure:
    """curves[scene][mode] = [history per seed]; history = [{step, train_seconds, key: value, ...}].

    Two rows of panels, one column per scene: ``key`` against the step, and against the
    training time (seconds, mean over seeds at each step; evaluation time excluded).
    """
    scenes = list(curves)
    fig = Figure(figsize=(5.0 * len(scenes), 7.0), layout="constrained")
    axes = fig.subplots(2, len(scenes), squeeze=False)
    for col, scene in enumerate(scenes):
        for mode, histories in curves[scene].items():
            steps, values = align_curves(histories, key)
            if steps.size == 0:
                continue
            _, seconds = align_curves(histories, "train_seconds")
            mean = values.mean(0)
            for row, x in enumerate((steps, seconds.mean(0) if seconds.shape == values.shape else None)):
                if x is None:
                    continue
                (line,) = axes[row, col].plot(x, mean, marker="o", markersize=3, label=mode)
                if len(values) > 1:
                    std = values.std(0, ddof=1)
                    axes[row, col].fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=0.2,
                                                linewidth=0)
        for row, xlabel in enumerate(("step", "training time (s)")):
            ax = axes[row, col]
            ax.set_title(scene)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    return fig


def side_by_side_figure(rows: list[dict]) -> Figure:
    """rows: [{"scene", "view", "gt": [H, W, 3], "preds": {mode: ([H, W, 3], psnr)}}].

    Two rows per scene: renderings (ground truth first), then |error| averaged over channels
    on one colour scale per scene.
    """
    n_cols = 1 + max(len(r["preds"]) for r in rows)
    fig = Figure(figsize=(2.6 * n_cols, 2.2 * 2 * len(rows)), layout="constrained")
    axes = fig.subplots(2 * len(rows), n_cols, squeeze=False)
    for k, row in enumerate(rows):
        top, bottom = axes[2 * k], axes[2 * k + 1]
        top[0].imshow(np.clip(row["gt"], 0, 1))
        top[0].set_title(f"{row['scene']} view {row['view']}: ground truth", fontsize=8)
        errors = {m: np.abs(p - row["gt"]).mean(-1) for m, (p, _) in row["preds"].items()}
        vmax = max(float(np.percentile(e, 99.5)) for e in errors.values()) or 1.0
        image = None
        for j, (mode, (pred, psnr)) in enumerate(row["preds"].items(), start=1):
            top[j].imshow(np.clip(pred, 0, 1))
            top[j].set_title(f"{mode}: {psnr:.2f} dB", fontsize=8)
            image = bottom[j].imshow(errors[mode], cmap="inferno", vmin=0.0, vmax=vmax)
            bottom[j].set_title(f"{mode}: |error|", fontsize=8)
        for ax in (*top, *bottom):
            ax.set_xticks([])
            ax.set_yticks([])
        bottom[0].axis("off")
        if image is not None:
            fig.colorbar(image, ax=list(bottom[1:]), shrink=0.8)
    return fig


def conditioning_figure(kappas: dict[str, list[dict]]) -> Figure:
    """kappas[mode] = [{"step": s, "layers": {name: [kappa_W, kappa_EW]}}] (one run per mode)."""
    modes = list(kappas)
    fig = Figure(figsize=(4.6 * len(modes), 3.6), layout="constrained")
    axes = fig.subplots(1, len(modes), squeeze=False, sharey=True)[0]
    for ax, mode in zip(axes, modes):
        history = kappas[mode]
        steps = [h["step"] for h in history]
        layers = list(history[0]["layers"]) if history else []
        for i, layer in enumerate(layers):
            color = f"C{i % 10}"
            kw = [h["layers"][layer][0] for h in history]
            kew = [h["layers"][layer][1] for h in history]
            ax.plot(steps, kw, color=color, label=f"{layer} κ(W)")
            ax.plot(steps, kew, color=color, linestyle="--", label=f"{layer} κ(EW)")
        ax.set_yscale("log")
        ax.set_title(mode)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("condition number")
    axes[-1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig
