"""Splats baked from a trained field against the field itself, one capture per call (issue 46's table).

For a checkpoint, as a user would type them (each a subprocess of ``python -m enerf``, timed on the wall):

1. ``enerf export splats --ckpt C --out OUT/NAME.ply``: the bake (start from the field, fit to the photos), or
   with ``--splats F`` the splats the run already has (``<run>/splats.ply`` of a run that ended in splats; its bake
   is the run's splat stage, read from its ``metrics.json``);
2. ``enerf eval --ckpt C --splats OUT/NAME.ply``: the held-out views scored from the splats
   (``<run>/metrics_splats.json``), beside the field's own scores of the same views (``<run>/metrics.json``,
   written by training or ``enerf eval``);
3. ``enerf render --ckpt C --splats OUT/NAME.ply --path P --frames 120``: a path video at the training size;
4. the field's time for the same path, from ``enerf render --ckpt C --path P --frames F`` on its first
   ``--field_frames`` frames' worth (a path of F frames: the same start, the per-frame time scaled to 120).

Figures are only meaningful with nothing else running on the machine (the load average is recorded
before and after each step).

    python -m benchmarks.splats --name fox --ckpt runs/capture_splats/fox/checkpoints/latest.pt \
        --splats runs/capture_splats/fox/splats.ply --datadir ../shared/data/nerfstudio/fox --record benchmarks/splats.json
    python -m benchmarks.splats --table benchmarks/splats.json     # the table of docs/splats.md (python -m benchmarks.pages writes it)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import TRAINING_CODE, Timer, command_line, git_commit, load_average, machine, write_record
from benchmarks.pages.records import fmt


def table(record: dict) -> str:
    """The markdown table of docs/splats.md (``<!-- table splats -->``, written by ``python -m benchmarks.pages``),
    from the record."""
    rows = ["| capture | field PSNR / SSIM | splats PSNR / SSIM | Δ PSNR | splats | bake | file | 120-frame video from the splats | the field, per frame |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, e in record["entries"].items():
        field = e.get("video_field")
        rows.append(f"| {name} | {e['field']['psnr']:.2f} dB / {e['field']['ssim']:.3f} | {e['splats']['psnr']:.2f} dB / "
                    f"{e['splats']['ssim']:.3f} | {fmt(e['delta_psnr'], '+.2f')} dB | {e['splats']['count']:,} | "
                    f"{e['bake']['seconds']:.0f} s | {e['ply_megabytes']:.1f} MB | {e['video_splats']['seconds']:.0f} s | "
                    + (f"{field['seconds_per_frame']:.1f} s |" if field else "– |"))
    return "\n".join(rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", default=None, metavar="RECORD", help="print the docs table of RECORD and stop")
    parser.add_argument("--name", help="the entry's name in the record (fox, boardgame, beer)")
    parser.add_argument("--ckpt")
    parser.add_argument("--datadir", default=None, help="the scene folder (default: the one recorded at training)")
    parser.add_argument("--splats", default=None, help="the run's own splat file: scored and rendered, no bake")
    parser.add_argument("--out", default="runs/bench_splats", help="folder for the PLY and the videos")
    parser.add_argument("--path", default="interp", help="camera path of the videos")
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument("--field_frames", type=int, default=4, help="frames the field renders for its time (0: none)")
    parser.add_argument("--record", default=None, help="JSON record to add the entry to")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="-- flags passed to enerf export splats")
    return parser.parse_args(argv)


def enerf(args: list[str]) -> dict:
    """Run ``python -m enerf ARGS``; its wall seconds, the load before / after and the last line it printed."""
    load = load_average()
    with Timer() as t:
        done = subprocess.run([sys.executable, "-m", "enerf", *args, "--quiet"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"enerf {' '.join(args)} failed: {done.stderr.strip().splitlines()[-1:]}")
    lines = done.stdout.strip().splitlines()
    return {"seconds": round(t.seconds, 1), "load_before": load, "load_after": load_average(),
            "printed": lines[-1] if lines else "", "command": "enerf " + " ".join(args)}


def main(argv: list[str] | None = None) -> dict | None:
    args = parse_args(argv)
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return None
    if not args.name or not args.ckpt:
        raise SystemExit("--name and --ckpt are needed (or --table RECORD)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = ["--datadir", args.datadir] if args.datadir else []
    extra = [a for a in args.extra if a != "--"]
    run = Path(args.ckpt).resolve().parent.parent
    if args.splats:
        ply = Path(args.splats)
        stage = json.loads((run / "metrics.json").read_text())["splats"]["bake"]
        bake = {"seconds": round(stage["seconds"], 1), "note": "the run's own splat stage (its metrics.json)"}
    else:
        ply = out / f"{args.name}.ply"
        bake = enerf(["export", "splats", "--ckpt", args.ckpt, "--out", str(ply), *data, *extra])
    score = enerf(["eval", "--ckpt", args.ckpt, "--splats", str(ply), *data])
    video = enerf(["render", "--ckpt", args.ckpt, "--splats", str(ply), "--path", args.path, "--frames",
                   str(args.frames), "--out", str(out / f"{args.name}_video_splats"), *data])
    field = json.loads((run / "metrics.json").read_text())
    splats = json.loads((run / "metrics_splats.json").read_text())
    entry = {
        "checkpoint_steps": field.get("steps"),
        "field": {"psnr": field["psnr"], "ssim": field["ssim"], "per_view_psnr": [p["psnr"] for p in field["per_image"]]},
        "splats": {"psnr": splats["psnr"], "ssim": splats["ssim"], "count": splats.get("splat_count"),
                   "sh_degree": splats.get("sh_degree"), "per_view_psnr": [p["psnr"] for p in splats["per_image"]]},
        "delta_psnr": splats["psnr"] - field["psnr"],
        "bake": bake, "eval_splats": score,
        "ply_megabytes": round(ply.stat().st_size / 2**20, 1),
        "video_splats": {**video, "frames": args.frames, "seconds_per_frame": round(video["seconds"] / args.frames, 3)},
    }
    if args.field_frames:
        fv = enerf(["render", "--ckpt", args.ckpt, "--field", "--path", args.path, "--frames", str(args.field_frames),
                    "--out", str(out / f"{args.name}_video_field"), *data])
        entry["video_field"] = {**fv, "frames": args.field_frames,
                                "seconds_per_frame": round(fv["seconds"] / args.field_frames, 2),
                                "note": f"{args.field_frames} frames of the same path kind; the time includes loading"}
    print(json.dumps({k: entry[k] for k in ("field", "splats", "delta_psnr", "ply_megabytes")}, indent=1))
    print(f"bake {bake['seconds']} s, splat video {video['seconds']} s for {args.frames} frames")
    if args.record:
        path = Path(args.record)
        record = json.loads(path.read_text()) if path.is_file() else {
            "what": ("each capture's run of enerf train --datadir with no flag (benchmarks/capture_splats.json): its "
                     "field against the splats it ended in, a 120-frame video from the splats, the field's time per "
                     "frame" if args.splats else "splats baked from a checkpoint against its field (issue 46)"),
            "depends": [*TRAINING_CODE, "enerf/splats", "enerf/export"], "machine": machine(), "entries": {}}
        record["entries"][args.name] = {**entry, "command": command_line(), "commit": git_commit()}
        write_record(path, record)
    return entry


if __name__ == "__main__":
    main()
