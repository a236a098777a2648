"""The user pages' tables of capture runs (docs/captures.md, docs/walkthrough.md): the named tables the pages mark,
registered as ``benchmarks.pages.tables``'s are."""

from __future__ import annotations

from benchmarks.pages.records import figure, fmt, record, table

__all__: list[str] = []


@table("beer_wall", "video_recipe")
def beer_wall() -> str:
    """docs/walkthrough.md's table: the beer video to a trained scene ending in splats, stage by stage (wall time)."""
    beer = record("video_recipe")
    parts = beer["wall_seconds"]  # metrics.json's stages of the field
    splats = beer["splats"]
    rest = beer["total_seconds"] - beer["video_seconds"] - parts["total"] - splats["bake_seconds"]
    return "\n".join([
        "| stage | wall time |", "|---|---|",
        f"| `enerf data video`: {beer['registered']} frames kept and posed | {beer['video_seconds']:.0f} s |",
        f"| loading the frames | {parts['load']:.1f} s |",
        f"| training the field ({beer['steps']:,} steps), with periodic evaluations of one view "
        f"| {parts['train'] / 60:.1f} min |",
        f"| the field's evaluation on the held-out frames: {beer['psnr']:.2f} dB, SSIM {beer['ssim']:.3f} "
        f"| {parts['eval'] / 60:.1f} min |",
        f"| baking the splats ({splats['fit_steps']:,} fit steps, {splats['splat_count']:,} Gaussians) "
        f"| {splats['bake_seconds'] / 60:.1f} min |",
        f"| the splats' evaluation: {splats['psnr']:.2f} dB, SSIM {splats['ssim']:.3f}; the preview video drawn "
        f"from them | {rest / 60:.1f} min |",
        f"| in all | {beer['total_seconds'] / 60:.1f} min |"])


@table("capture_samplers", "capture_defaults", "capture_30min", "capture_samplers")
def capture_samplers() -> str:
    """docs/captures.md's table: the zero-config proposal sampler (10 and 30 minutes) against the hierarchical
    one (10 minutes), every 8th photo held out."""
    runs = {**record("capture_defaults")["runs"], **record("capture_30min")["runs"], **record("capture_samplers")["runs"]}
    rows = ["| capture | sampler, training time | held-out PSNR | worst view (below the mean) | steps |",
            "|---|---|---|---|---|"]
    samplers = (("proposal, 10 min", "defaults"), ("proposal, 30 min", "30min"), ("hierarchical, 10 min", "hierarchical"))
    for scene, capture, rows_of in (("fox", "instant-ngp's fox", samplers),
                                    ("boardgame", "boardgame, a walk around a board game", samplers),
                                    ("beer", "beer, the phone video", samplers[:2])):  # no hierarchical run
        for sampler, run in rows_of:
            e = runs[f"{scene}_{run}"]
            first = f"{capture} ({len(e['views'])} held-out views)" if sampler.startswith("proposal, 10") else ""
            worst = min(v["psnr"] for v in e["views"])
            rows.append(f"| {first} | {sampler} | {e['psnr']:.2f} dB | {worst:.2f} dB ({e['worst_below_mean']:.1f} dB) "
                        f"| {e['steps']:,} |")
    return "\n".join(rows)


@figure("capture_30min_cpu", "capture_30min", "capture_defaults")
def capture_30min_cpu() -> str:
    """How the 30-minute runs' CPU compares with the 10-minute runs' by the fox's training steps a second in each
    record: "a slower CPU (the fox's steps a second: A in 30 minutes, B in 10)" ("a faster" / "the same kind of" within 10 %)."""
    long, short = (e["steps"] / e["train_seconds"] for e in (record("capture_30min")["runs"]["fox_30min"],
                                                              record("capture_defaults")["runs"]["fox_defaults"]))
    speed = "the same kind of" if abs(long / short - 1) < 0.1 else "a slower" if long < short else "a faster"
    return f"{speed} CPU (the fox's steps a second: {long:.1f} in 30 minutes, {short:.1f} in 10)"


@table("capture_probes", "capture_probes")
def capture_probes() -> str:
    """docs/captures.md's sample-count table: the fox with no config and with other sample counts, one sitting."""
    runs = {k: v for k, v in record("capture_probes")["runs"].items() if k.startswith("fox_")}
    base = runs["fox_defaults_same_sitting"]
    rows = ["| flags | steps in 10 min | held-out PSNR | Δ against no flag | right halves after an affine fit |",
            "|---|---|---|---|---|"]
    for e in sorted(runs.values(), key=lambda e: e is not base):
        flags = " ".join(e["flags"]) or "none (48 samples, 128 proposal samples)"
        delta = "" if e is base else fmt(e["psnr"] - base["psnr"], "+.2f") + " dB"
        rows.append(f"| {'`' + flags + '`' if e['flags'] else flags} | {e['steps']:,} | {e['psnr']:.2f} dB | {delta} "
                    f"| {e['psnr_fit_right']:.2f} dB |")
    return "\n".join(rows)


def _fidelity_runs(far: bool) -> list[tuple[str, dict]]:
    """The fidelity tables' rows, grouped by capture in the option record's order: each capture's zero-config
    run (capture_defaults.json's ``CAPTURE_defaults`` or ``CAPTURE_far_defaults``, the same training code), then its
    runs with an option (fidelity.json) on the same split."""
    defaults, options = record("capture_defaults")["runs"], record("fidelity")["runs"]
    captures = list(dict.fromkeys(name.split("_")[0] for name in options))
    rows = []
    for capture in captures:
        base = f"{capture}_far_defaults" if far else f"{capture}_defaults"
        if base in defaults:
            rows.append((base, defaults[base]))
        rows += [(name, r) for name, r in options.items()
                 if name.split("_")[0] == capture and _far(r) == far and not r.get("diagnostic")]
    return rows


def _options(run: dict) -> str:
    """A run's fidelity options as the table shows them (``--holdout far`` left out: the table says the split)."""
    flags = [f for a, f in zip([None, *run["flags"]], run["flags"]) if f != "--holdout" and a != "--holdout"]
    return f"`{' '.join(flags)}`" if flags else "none (the defaults)"


@table("fidelity", "fidelity", "capture_defaults")
def fidelity() -> str:
    """docs/captures.md's table: zero-config 10-minute runs with and without issue 47's fidelity options
    (every 8th view held out)."""
    rows = ["| run | options | steps | held-out PSNR | worst view (below the mean) | right halves after an affine fit "
            "| final scoring ÷ training time |", "|---|---|---|---|---|---|---|"]
    for name, r in _fidelity_runs(far=False):
        rows.append(f"| {name} | {_options(r)} | {r['steps']:,} | {r['psnr']:.2f} dB | {r['worst_view']} "
                    f"({r['worst_below_mean']:.2f} dB) | {r['psnr_fit_right']:.2f} dB | {100 * r['final_eval_share']:.1f} % |")
    return "\n".join(rows)


def _far(run: dict) -> bool:
    """A run scored on the far split (``--holdout far``)."""
    return any(a == "--holdout" and b == "far" for a, b in zip(run["flags"], run["flags"][1:]))


@table("fidelity_far", "fidelity", "capture_defaults")
def fidelity_far() -> str:
    """docs/captures.md's far-split table: runs holding out the cameras farthest from the capture's centre,
    beside the same capture's every-8th split with the defaults (capture_defaults.json)."""
    defaults = record("capture_defaults")["runs"]
    rows = ["| run | options | steps | far views' PSNR | on the pixels a training camera sees (their share) "
            "| worst view (below the mean) | every-8th split, defaults |", "|---|---|---|---|---|---|---|"]
    for name, r in _fidelity_runs(far=True):
        base = defaults.get(f"{name.split('_')[0]}_defaults")
        every = f"{base['psnr']:.2f} dB ({base['steps']:,} steps)" if base is not None else "not run"
        rows.append(f"| {name} | {_options(r)} | {r['steps']:,} | {r['psnr']:.2f} dB | {r['psnr_seen']:.2f} dB "
                    f"({100 * r['seen_fraction']:.1f} %) | {r['worst_view']} ({r['worst_below_mean']:.2f} dB) | {every} |")
    return "\n".join(rows)


@table("capture_defaults", "capture_defaults")
def capture_defaults() -> str:
    """docs/captures.md's table: each capture with no config for 10 minutes, both splits, the spread of the
    held-out views and the wall time of each stage."""
    rows = ["| capture, held-out split | steps | held-out PSNR | views: lowest – highest (worst below the mean) "
            "| loading + training + final scoring | final scoring ÷ training time |", "|---|---|---|---|---|---|"]
    runs = record("capture_defaults")["runs"]
    captures = list(dict.fromkeys(name.split("_")[0] for name in runs))
    for name, r in sorted(runs.items(), key=lambda item: (captures.index(item[0].split("_")[0]), _far(item[1]))):
        psnrs = [v["psnr"] for v in r["views"]]
        split = f"far ({len(psnrs)} views)" if _far(r) else f"every 8th ({len(psnrs)} views)"
        wall = r["wall_seconds"]
        rows.append(f"| {name.split('_')[0]}, {split} | {r['steps']:,} | {r['psnr']:.2f} dB | {min(psnrs):.2f} – "
                    f"{max(psnrs):.2f} dB ({r['worst_below_mean']:.2f} dB) | {wall['load']:.0f} + {wall['train']:.0f} + "
                    f"{wall['eval']:.0f} s | {100 * r['final_eval_share']:.1f} % |")
    return "\n".join(rows)

