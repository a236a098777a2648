"""The capture samplers side by side: the hierarchical sampler's zero-config runs (benchmarks/capture_samplers.json)
and docs/img/capture_samplers.png.

docs/captures.md's table puts the proposal sampler's zero-config runs (capture_defaults.json: 10 minutes;
capture_30min.json: 30 minutes) beside the hierarchical sampler's (this record: the same command with
``--sampler hierarchical --N_samples 64``, the capture sampler before the proposal one). Each run alone on
the machine, one after the other::

    python -m benchmarks.fidelity --record benchmarks/capture_samplers.json --name fox_hierarchical \\
        --datadir ../shared/data/nerfstudio/fox -- --sampler hierarchical --N_samples 64
    python -m benchmarks.fidelity --record benchmarks/capture_samplers.json --name boardgame_hierarchical \\
        --datadir ../shared/data/captures/boardgame -- --sampler hierarchical --N_samples 64
    python -m benchmarks.capture_samplers        # the figure, from the runs' metrics.json (runs/fid/NAME)

The figure: held-out PSNR of each run's periodic evaluations (the first held-out view every 1,000 steps)
against its training time; a run whose folder is gone is left out (said), a capture with none is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.fidelity import BASEDIR
from benchmarks.harness import ROOT

# the run of each curve (runs/fid/NAME; its record: capture_defaults, capture_30min, capture_samplers), per capture
CURVES = {scene: {"proposal, 10 min": f"{scene}_defaults", "proposal, 30 min": f"{scene}_30min",
                  "hierarchical, 10 min": f"{scene}_hierarchical"} for scene in ("fox", "boardgame")}
STYLES = {"proposal, 10 min": "-o", "proposal, 30 min": ":^", "hierarchical, 10 min": "--s"}


def histories(basedir: Path) -> dict[str, dict[str, list[dict]]]:
    """Per capture and curve, the periodic evaluations of its run (``BASEDIR/NAME/metrics.json``'s history
    without its last entry, which scores every held-out view); a curve whose run folder is missing is left
    out."""
    out: dict[str, dict[str, list[dict]]] = {}
    for scene, curves in CURVES.items():
        for label, name in curves.items():
            path = basedir / name / "metrics.json"
            if path.is_file():
                out.setdefault(scene, {})[label] = json.loads(path.read_text())["history"][:-1]
    return out


def plot(curves: dict[str, dict[str, list[dict]]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, scene in zip(axes, CURVES):
        for label, hist in curves.get(scene, {}).items():
            ax.plot([h["train_seconds"] / 60 for h in hist], [h["psnr"] for h in hist], STYLES[label], ms=3,
                    label=label)
        ax.set_title(scene)
        ax.set_xlabel("training time (min)")
        ax.set_ylabel("PSNR of the first held-out view (dB)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp" + out.suffix)
    fig.savefig(tmp, dpi=110)
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--basedir", default=BASEDIR, help="where the runs are (benchmarks.fidelity's)")
    parser.add_argument("--plot", default="docs/img/capture_samplers.png")
    args = parser.parse_args(argv)
    curves = histories(ROOT / args.basedir)
    missing = [name for scene, c in CURVES.items() for label, name in c.items() if label not in curves.get(scene, {})]
    if len(curves) < len(CURVES):
        print(f"capture_samplers: no run folder for {', '.join(missing)} under {args.basedir}; train them first "
              "(the commands in this module's docstring)", file=sys.stderr)
        return 2
    if missing:
        print(f"capture_samplers: {', '.join(missing)} not under {args.basedir}: drawn without them")
    plot(curves, ROOT / args.plot)
    print(f"wrote {ROOT / args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
