"""The comparison table (paper's Table 4 layout): compare.md and compare.csv.

Rows are modes, columns scenes plus "Avg.", one table per metric. A cell is the mean over
seeds ± the sample standard deviation (ddof = 1; omitted with one seed), and for every
mode but the baseline the difference of means to the baseline with the 95 % confidence
interval of the per-seed paired differences (same seed, this mode minus the baseline; Student's t
with n - 1 degrees of freedom), "(+0.42 [-0.10, +0.94])"; no interval with one seed. "Avg." averages
the scenes within each seed first, then takes mean ± std over seeds. A metric that is
missing (null) for any seed of a cell, as LPIPS is without AlexNet weights, reads "n/a",
never a number.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import numpy as np

from .tasks import TaskKind

__all__ = ["AVG", "collect", "cell_stats", "paired_ci", "table_rows", "to_csv", "to_markdown"]

AVG = "Avg."
NA = "n/a"


def collect(task: TaskKind, metrics: dict[tuple[str, str, int], dict], scenes: Sequence[str], modes: Sequence[str],
            seeds: Sequence[int]) -> dict[str, dict[str, dict[str, list[float | None]]]]:
    """values[metric][scene][mode] = [value per seed] (None where metrics.json has null / no key).

    ``metrics`` maps (scene, mode, seed) to that run's metrics.json; "Avg." is added per seed.
    """
    values: dict = {}
    for metric in task.metrics:
        per = {s: {m: [_number(metrics[(s, m, seed)].get(metric.key)) for seed in seeds] for m in modes} for s in scenes}
        per[AVG] = {}
        for m in modes:
            per[AVG][m] = [
                None if any(per[s][m][i] is None for s in scenes) else float(np.mean([per[s][m][i] for s in scenes]))
                for i in range(len(seeds))
            ]
        values[metric.key] = per
    return values


def _number(value) -> float | None:
    return None if value is None else float(value)


def cell_stats(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """(mean, sample std) over seeds; (None, None) if any value is missing; std None for one seed."""
    if not values or any(v is None for v in values):
        return None, None
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), (float(arr.std(ddof=1)) if len(arr) > 1 else None)


def paired_ci(values: Sequence[float | None], baseline: Sequence[float | None],
              level: float = 0.95) -> tuple[float, float] | None:
    """Confidence interval of the mean paired difference ``values[i] - baseline[i]`` (same seed).

    mean(d) ± t_{(1 + level) / 2, n - 1} · std(d, ddof=1) / sqrt(n); None with fewer than two
    pairs or a missing value.
    """
    from scipy import stats

    if len(values) < 2 or any(v is None for v in [*values, *baseline]):
        return None
    diffs = np.asarray(values, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    half = float(stats.t.ppf(0.5 + level / 2, len(diffs) - 1) * diffs.std(ddof=1) / np.sqrt(len(diffs)))
    return float(diffs.mean() - half), float(diffs.mean() + half)


def table_rows(task: TaskKind, values: dict, scenes: Sequence[str], modes: Sequence[str], seeds: Sequence[int],
               baseline: str | None) -> list[dict]:
    """One dict per (scene or "Avg.", mode): mean / std / delta / per-seed values of every metric."""
    rows = []
    for scene in [*scenes, AVG]:
        for mode in modes:
            row = {"scene": scene, "mode": mode, "n_seeds": len(seeds), "seeds": list(seeds)}
            for metric in task.metrics:
                mean, std = cell_stats(values[metric.key][scene][mode])
                delta = ci = None
                if baseline in modes and mode != baseline:
                    base_values = values[metric.key][scene][baseline]
                    base, _ = cell_stats(base_values)
                    delta = None if mean is None or base is None else mean - base
                    ci = paired_ci(values[metric.key][scene][mode], base_values)
                row[metric.key] = {"mean": mean, "std": std, "delta": delta, "delta_ci95": ci,
                                   "values": values[metric.key][scene][mode]}
            rows.append(row)
    return rows


def _csv_number(value: float | None, missing: str) -> str:
    return missing if value is None else repr(float(value))


def to_csv(task: TaskKind, rows: list[dict], baseline: str | None) -> str:
    """Long CSV: one line per (scene, mode); full-precision numbers; "n/a" for unavailable metrics."""
    header = ["task", "scene", "mode", "n_seeds"]
    for metric in task.metrics:
        header += [f"{metric.key}_mean", f"{metric.key}_std", f"{metric.key}_delta_vs_{baseline or 'baseline'}",
                   f"{metric.key}_delta_ci95_low", f"{metric.key}_delta_ci95_high", f"{metric.key}_per_seed"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        line = [task.name, row["scene"], row["mode"], row["n_seeds"]]
        for metric in task.metrics:
            cell = row[metric.key]
            available = cell["mean"] is not None
            is_baseline = row["mode"] == baseline or baseline is None
            line += [
                _csv_number(cell["mean"], NA),
                _csv_number(cell["std"], NA if not available else ""),
                _csv_number(cell["delta"], "" if is_baseline else NA),
                *(["", ""] if cell["delta_ci95"] is None else [repr(v) for v in cell["delta_ci95"]]),
                ";".join(NA if v is None else repr(float(v)) for v in cell["values"]),
            ]
        writer.writerow(line)
    return buf.getvalue()


def _md_cell(cell: dict, fmt: str) -> str:
    if cell["mean"] is None:
        return NA
    text = format(cell["mean"], fmt)
    if cell["std"] is not None:
        text += f" ± {format(cell['std'], fmt)}"
    if cell["delta"] is not None:
        ci = cell.get("delta_ci95")
        interval = "" if ci is None else f" [{format(ci[0], '+' + fmt)}, {format(ci[1], '+' + fmt)}]"
        text += f" ({format(cell['delta'], '+' + fmt)}{interval})"
    return text


def to_markdown(task: TaskKind, rows: list[dict], scenes: Sequence[str], modes: Sequence[str], seeds: Sequence[int],
                baseline: str | None, cost: dict[str, dict] | None = None, title: str = "") -> str:
    """One table per metric (rows: modes; columns: scenes, Avg.), then a cost table."""
    lookup = {(r["scene"], r["mode"]): r for r in rows}
    seeds_text = ", ".join(map(str, seeds))
    std_note = "mean ± std over seeds (sample std)" if len(seeds) > 1 else "one seed"
    delta_note = ""
    if baseline in modes:
        delta_note = f"; (Δ vs {baseline}" + (" [95 % CI of the per-seed paired differences]" if len(seeds) > 1 else "") + ")"
    lines = [f"# {title or task.name + ' comparison'}", "",
             f"Seeds {seeds_text}: {std_note}{delta_note}. n/a: the metric is unavailable for some seed.", ""]
    for metric in task.metrics:
        arrow = "↑" if metric.higher_is_better else "↓"
        lines += [f"## {metric.label} {arrow}", "", "| mode | " + " | ".join([*scenes, AVG]) + " |",
                  "|---" * (len(scenes) + 2) + "|"]
        for mode in modes:
            cells = [_md_cell(lookup[(s, mode)][metric.key], metric.fmt) for s in [*scenes, AVG]]
            lines.append(f"| {mode} | " + " | ".join(cells) + " |")
        lines.append("")
    if cost:
        lines += ["## Cost (all scenes and seeds)", "", "| mode | train s (mean) | wall s (mean) | peak RSS GB (max) |",
                  "|---|---|---|---|"]
        for mode in modes:
            c = cost.get(mode, {})
            lines.append(f"| {mode} | {_fmt_opt(c.get('train_seconds'), '.1f')} | {_fmt_opt(c.get('wall_seconds'), '.1f')} "
                         f"| {_fmt_opt(c.get('peak_rss_gb'), '.2f')} |")
        lines.append("")
    return "\n".join(lines)


def _fmt_opt(value, fmt: str) -> str:
    return NA if value is None else format(value, fmt)
