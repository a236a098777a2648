"""A capture trained with no config, as a user types it, ending in splats: ``enerf train --datadir S``.

One capture per call: ``python -m enerf train --datadir S --expname NAME --basedir OUT [FLAGS]`` as a
subprocess, timed on the wall (training, bake and scoring; the preview video is turned off, it is no part
of the figure), the load average recorded before and after; then ``enerf render --ckpt C --path interp
--frames 120`` (the run's splats, at the training size), timed. The entry keeps, from the run's metrics.json,
the field's and the splats' held-out PSNR / SSIM / LPIPS, each held-out view's PSNR from both and the
share of its pixels the splats leave under half opacity, the worst view (largest loss of the splats
against the field), the splats' count and file size, and the bake's figures.

    python -m benchmarks.capture_splats --name fox --datadir ../shared/data/nerfstudio/fox \\
        --record benchmarks/capture_splats.json
    python -m benchmarks.capture_splats --name fox_far --datadir ../shared/data/nerfstudio/fox \\
        --record benchmarks/capture_splats.json -- --holdout far
    python -m benchmarks.capture_splats --name beer --existing benchmarks/video_recipe.json \\
        --record benchmarks/capture_splats.json     # RUNS/beer: a link to the recipe's run folder
    python -m benchmarks.capture_splats --table benchmarks/capture_splats.json

``--existing RECORD`` takes a run that ``benchmarks.video_recipe`` made with the same ``enerf train --datadir``
(its folder linked as BASEDIR/NAME), so one run gives both records their figures; the wall time and load are that
record's train command's (which also renders the preview video).

Figures are only meaningful with nothing else running on the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import TRAINING_CODE, Timer, command_line, git_commit, load_average, machine, write_record
from benchmarks.pages.records import fmt

# the files a run ending in splats executes (not the page's nor the other file formats': benchmarks.page_size,
# benchmarks.splat_files)
SPLAT_STAGE = [f"enerf/splats/{name}" for name in (
    "__init__.py", "bake.py", "clean.py", "densify.py", "export.py", "files.py", "frames.py", "gaussians.py", "ply.py",
    "projection.py", "rasterize.py", "source.py", "teacher.py", "tiles.py")]
DEPENDS = TRAINING_CODE + SPLAT_STAGE + ["enerf/export", "enerf/cli/train.py", "enerf/loaded_run.py", "enerf/views.py"]
WHAT = ("enerf train --datadir CAPTURE with no config (the field for its --time_budget, then the splats for "
        "--splat_seconds), wall time of training, bake and scoring; held-out figures of the field and of the splats")


def entry_from_run(run: Path) -> dict:
    """The record's entry from a finished run folder (its metrics.json with ``splats``)."""
    m = json.loads((run / "metrics.json").read_text())
    s = m.get("splats")
    if not s:
        raise SystemExit(f"{run}/metrics.json has no splats: the run did not end in splats")
    field = {p["view"]: p["psnr"] for p in m["per_image"]}
    views = [{"view": v["view"], "field": field[v["view"]], "splats": v["psnr"], "delta": v["psnr"] - field[v["view"]],
              "uncovered": v.get("uncovered")} for v in s["per_view"]]
    worst = min(views, key=lambda v: v["delta"])
    return {"steps": m["steps"], "train_seconds": m["train_seconds"],
            "field": {k: m.get(k) for k in ("psnr", "ssim", "lpips")},
            "splats": {k: s.get(k) for k in ("psnr", "ssim", "lpips", "splat_count", "uncovered_max")},
            "delta_psnr": s["psnr"] - m["psnr"], "views": views, "worst_view": worst,
            "views_more_than_1db_below": sum(v["delta"] < -1.0 for v in views),
            "ply_megabytes": round((run / "splats.ply").stat().st_size / 2**20, 1), "bake": s.get("bake")}


def table(record: dict) -> str:
    """The markdown table of docs/splats.md and docs/captures.md (``<!-- table capture_splats -->``)."""
    rows = ["| capture | field PSNR | splats PSNR | Δ | worst view, Δ | views > 1 dB below | most uncovered view | splats | "
            "file | wall | 120-frame video |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, e in record["entries"].items():
        worst = e["worst_view"]
        rows.append(f"| {name} | {e['field']['psnr']:.2f} dB | {e['splats']['psnr']:.2f} dB | "
                    f"{fmt(e['delta_psnr'], '+.2f')} dB | {worst['view']}, {fmt(worst['delta'], '+.2f')} dB | "
                    f"{e['views_more_than_1db_below']} of {len(e['views'])} | "
                    f"{100 * (e['splats']['uncovered_max'] or 0):.1f} % | {e['splats']['splat_count']:,} | "
                    f"{e['ply_megabytes']:.1f} MB | {e['wall_minutes']:.1f} min | {e['video']['seconds']:.0f} s |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", default=None, metavar="RECORD", help="print the docs table of RECORD and stop")
    parser.add_argument("--name", help="the entry's name (and the run's --expname)")
    parser.add_argument("--datadir")
    parser.add_argument("--basedir", default="runs/capture_splats")
    parser.add_argument("--record", default=None, help="JSON record to add the entry to")
    parser.add_argument("--existing", default=None, metavar="RECIPE",
                        help="no training: the run benchmarks.video_recipe's RECIPE record timed (BASEDIR/NAME)")
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return None
    if not args.name or not args.datadir:
        raise SystemExit("--name and --datadir are needed (or --table RECORD)")
    cmd = [sys.executable, "-m", "enerf", "train", "--datadir", args.datadir, "--expname", args.name,
           "--basedir", args.basedir, "--video", "none", "--quiet", *extra]
    run = Path(args.basedir) / args.name
    if args.existing:
        recipe = json.loads(Path(args.existing).read_text())
        if not (run / "metrics.json").is_file():
            raise SystemExit(f"{run}/metrics.json: no such run; link the recipe's run folder there first")
        load, seconds, printed = recipe["load_before"], recipe["train_command_seconds"], []
    else:
        load = load_average()
        with Timer() as t:
            done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"enerf train failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        seconds, printed = t.seconds, done.stdout.strip().splitlines()[-6:]
    video_load = load_average()
    with Timer() as v:  # the run's splats drawn along a 120-frame path through the training cameras
        drawn = subprocess.run([sys.executable, "-m", "enerf", "render", "--ckpt", str(run / "checkpoints" / "latest.pt"),
                                "--path", "interp", "--frames", "120", "--quiet"], capture_output=True, text=True)
    if drawn.returncode != 0:
        raise SystemExit(f"enerf render failed: {(drawn.stderr.strip().splitlines() or ['?'])[-1]}")
    entry = {**entry_from_run(run), "wall_minutes": round(seconds / 60, 2),
             "video": {"seconds": round(v.seconds, 1), "frames": 120, "path": "interp", "load_before": video_load,
                       "printed": drawn.stdout.strip().splitlines()[-1:]},
             "load_before": load, "load_after": load_average(), "flags": extra, "printed": printed,
             "command": command_line(), "commit": git_commit()}
    if args.existing:
        entry.update(existing=args.existing, commit=recipe["commit"])
    print("\n".join(entry["printed"]))
    print(f"wall {entry['wall_minutes']:.1f} min; worst view {entry['worst_view']}")
    if args.record:
        path = Path(args.record)
        record = json.loads(path.read_text()) if path.is_file() else {"what": WHAT, "machine": machine(), "entries": {}}
        record["entries"][args.name] = entry
        record.update(what=WHAT, machine=machine(), depends=DEPENDS)
        commits = {e["commit"] for e in record["entries"].values()}  # one commit for all, or each entry's own
        if len(commits) == 1:
            record["commit"] = commits.pop()
        else:
            record.pop("commit", None)
        write_record(path, record)
    return entry


if __name__ == "__main__":
    main()
