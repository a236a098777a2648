"""How often row equilibration raises the condition number of a Gaussian matrix, by shape.

The weight-conditioning paper's Prop. 1 states κ(E W) ≤ κ(W) for every W (E: the row
equilibration of W, rows of unit 2-norm); Van der Sluis's theorem, which its proof quotes,
only gives κ(E W) ≤ sqrt(m) · min_D κ(D W) ≤ sqrt(m) · κ(W) for W with m rows. This tool draws
W with i.i.d. N(0, 1) entries for each shape (rows x columns, the paper's layout: rows = a
layer's inputs) and counts the draws with κ(E W) > κ(W) (numpy SVD, float64), with the
largest ratio κ(E W) / κ(W) seen and sqrt(m).

    python -m studies.kappa_shapes                 # about a minute on one core
    python -m studies.kappa_shapes --draws 2000 --big_draws 100

Writes benchmarks/kappa_shapes.json (the command, the counts, a Wilson 95 % interval each).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from benchmarks.harness import ROOT, load_average, write_record


SHAPES = ((4, 3), (3, 4), (8, 8), (256, 256))


def kappa(a: np.ndarray) -> float:
    s = np.linalg.svd(a, compute_uv=False)
    return float(s[0] / s[-1])


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k / n."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def count_rises(rows: int, cols: int, draws: int, rng: np.random.Generator) -> dict:
    rises, worst = 0, 0.0
    for _ in range(draws):
        w = rng.standard_normal((rows, cols))
        ratio = kappa(w / np.linalg.norm(w, axis=1, keepdims=True)) / kappa(w)
        rises += ratio > 1.0
        worst = max(worst, ratio)
    low, high = wilson(rises, draws)
    return {"shape": f"{rows}x{cols}", "draws": draws, "rises": int(rises), "fraction": rises / draws,
            "ci95": [low, high], "worst_ratio": worst, "sqrt_m": math.sqrt(rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20000, help="draws per small shape")
    parser.add_argument("--big_draws", type=int, default=400, help="draws of 256 x 256")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "kappa_shapes.json"))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    results = []
    for rows, cols in SHAPES:
        n = args.big_draws if rows * cols > 1000 else args.draws
        results.append(count_rises(rows, cols, n, rng))
        r = results[-1]
        print(f"{r['shape']}: κ(EW) > κ(W) in {r['rises']}/{n} ({100 * r['fraction']:.1f} %), "
              f"worst ratio {r['worst_ratio']:.3f}, sqrt(m) {r['sqrt_m']:.2f}", flush=True)
    argv_text = " ".join(argv if argv is not None else sys.argv[1:])
    write_record(args.out, {
        "what": "fraction of Gaussian W (i.i.d. N(0,1), rows x columns, rows = inputs) with κ(EW) > κ(W) under row "
                "equilibration (rows of unit norm); Wilson 95 % interval; worst κ(EW)/κ(W) against Van der Sluis's "
                "sqrt(m)",
        "command": f"python -m studies.kappa_shapes {argv_text}".strip(),
        "load": load_average()[0],
        "results": results,
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
