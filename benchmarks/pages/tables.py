"""The named tables and figures the user pages mark (``<!-- table NAME -->``, ``<!-- fig NAME -->``).

A template row's ``{RECORD:KEY.PATH:FORMAT}`` is the value at KEY.PATH of benchmarks/RECORD.json, formatted
with FORMAT (see ``benchmarks.pages.records.fill``). Prose around a table or a figure stays on its page.
The splats' tables are in ``benchmarks.pages.splat_tables``, the capture runs' in ``benchmarks.pages.capture_tables``.
"""

from __future__ import annotations

import re

from benchmarks.pages.records import figure, fmt, record, table, template_table

__all__: list[str] = []

T, R, C, D = "docs/train.md", "benchmarks/", "docs/captures.md", "docs/conditioning.md"

RESULTS = [
    "| the demo (first command above), {demo:steps:,} steps | held-out PSNR {demo:summary.psnr:.2f} dB, SSIM "
    "{demo:summary.ssim:.3f}; {demo:summary.wall_seconds} s wall, peak RSS {demo:summary.peak_rss_gib:.2f} GiB "
    f"| [train]({T}#what-the-configs-reach) · [record]({R}demo.json) |",
    "| LLFF fern in 10 min (`configs/fern_cpu.txt`), seeds 0–2 | {fern_cpu:summary.psnr_mean:.2f} ± "
    "{fern_cpu:summary.psnr_std:.2f} dB; an earlier equal-time pair: nerf-pytorch {fern_cpu:summary.peer_psnr:.2f} dB, "
    "enerf {fern_cpu:summary.enerf_beside_peer_psnr:.2f} dB "
    "{stale:fern_cpu} " f"| [train]({T}#what-the-configs-reach) · [record]({R}fern_cpu.json) |",
    "| Blender lego in 10 min (`configs/lego_cpu.txt`) | {lego_cpu:summary.psnr:.2f} dB "
    "{stale:lego_cpu} " f"| [train]({T}#what-the-configs-reach) · [record]({R}lego_cpu.json) |",
    "| instant-ngp's fox (a phone capture), `enerf train --datadir` with no config: 7 min of field, then 7 of splats "
    "| splats {capture_splats:entries.fox.splats.psnr:.2f} dB against the field's {capture_splats:entries.fox.field.psnr:.2f} dB "
    "({capture_splats:entries.fox.steps:,} steps); {capture_splats:entries.fox.wall_minutes:.1f} min wall in all "
    "{stale:capture_splats} " f"| [splats](docs/splats.md#training-ends-in-splats) · [record]({R}capture_splats.json) |",
    "| a walk around a board game (96 phone photos), the same "
    "| splats {capture_splats:entries.boardgame.splats.psnr:.2f} dB against the field's {capture_splats:entries.boardgame.field.psnr:.2f} dB "
    "({capture_splats:entries.boardgame.steps:,} steps); {capture_splats:entries.boardgame.wall_minutes:.1f} min wall in all "
    "{stale:capture_splats} " f"| [splats](docs/splats.md#training-ends-in-splats) · [record]({R}capture_splats.json) |",
    "| a 24 s phone video to a trained scene: `enerf data video` then `enerf train --datadir`, no other flag "
    "| {video_recipe:registered} frames kept and registered; splats {video_recipe:splats.psnr:.2f} dB against the "
    "field's {video_recipe:psnr:.2f} dB; {video_recipe:total_minutes:.1f} min wall in all "
    "{stale:video_recipe} " f"| [data](docs/data.md#from-a-phone-video-enerf-data-video) · [record]({R}video_recipe.json) |",
    "| row vs vanilla, demo, 3 seeds × 3,000 steps | {conditioning_demo:summary.delta_row:+.2f} dB "
    "({conditioning_demo:summary.row_mean:.2f} ± {conditioning_demo:summary.row_std:.2f} vs "
    "{conditioning_demo:summary.none_mean:.2f} ± {conditioning_demo:summary.none_std:.2f}) "
    f"| [conditioning]({D}#vanilla-vs-e-nerf-on-the-embedded-scene) · [record]({R}conditioning_demo.json) |",
    "| all methods against vanilla, demo, 3 seeds × 500 steps | `col` {methods_demo:summary.col_delta:+.2f} dB, "
    "`row+bnp` {methods_demo:summary.row_bnp_delta:+.2f} dB, `row` {methods_demo:summary.row_delta:+.2f} dB; "
    "`ws` renders black ({methods_demo:summary.ws_psnr:.2f} dB) "
    f"| [conditioning]({D}#all-methods) · [record]({R}methods_demo.json) |",
    "| row vs vanilla, 3 seeds: fern 1,500 steps / lego 300 steps (Δ and its 95 % CI) "
    "| fern {conditioning_real:summary.fern_row_delta:+.2f} dB [{conditioning_real:summary.fern_ci_low:+.2f}, "
    "{conditioning_real:summary.fern_ci_high:+.2f}]; lego {conditioning_real:summary.lego_row_delta:+.2f} dB "
    "[{conditioning_real:summary.lego_ci_low:+.2f}, {conditioning_real:summary.lego_ci_high:+.2f}] "
    "{stale:conditioning_real} " f"| [conditioning]({D}#vanilla-vs-e-nerf-on-fern-and-lego) · [record]({R}conditioning_real.json) |",
    "| the paper's 8 × 256 NeRF, row vs vanilla, 3 seeds × 400 steps (Δ and its 95 % CI) "
    "| fern {paper_study:summary.nerf.fern_delta:+.2f} dB [{paper_study:summary.nerf.fern_ci_low:+.2f}, "
    "{paper_study:summary.nerf.fern_ci_high:+.2f}]; lego {paper_study:summary.nerf.lego_delta:+.2f} dB "
    "[{paper_study:summary.nerf.lego_ci_low:+.2f}, {paper_study:summary.nerf.lego_ci_high:+.2f}] "
    "{stale:paper_study} " f"| [paper](docs/paper.md#e-nerf-vs-nerf-on-fern-and-lego) · [record]({R}paper_study.json) |",
    "| occupancy grid vs hierarchical, demo: time to the hierarchical run's PSNR after 300 s (3 seeds) "
    "| reached on {marcher_race:summary.speed.reached} of 3 seeds, in {marcher_race:summary.speed.time_ratio_min:.2f}–"
    "{marcher_race:summary.speed.time_ratio_max:.2f}× the time; "
    "{marcher_race:summary.speed.fewer_queries_min:.2f}–{marcher_race:summary.speed.fewer_queries_max:.2f}× "
    "fewer network queries per ray{stale:marcher_race} " f"| [render](docs/render.md#renderers) · [record]({R}marcher_race.json) |",
    "| cost of `row` per training step against vanilla (alternating pairs of fresh processes, medians) "
    "| demo ×{row_cost:summary.demo_ratio:.3f}; the capture preset (fox) ×{row_cost:summary.capture_ratio:.3f} "
    "{stale:row_cost} " f"| [conditioning]({D}#cost-per-training-step) · [record]({R}row_cost.json) |",
    "| shapes in 300 s (`configs/shape_cpu.txt`), torus / bunny | occupancy IoU "
    "{shapes_targets:summary.torus_occupancy_iou:.4f} / {shapes_targets:summary.bunny_occupancy_iou:.4f}; SDF "
    "Chamfer-L1 {shapes_targets:summary.torus_sdf_chamfer_l1:.5f} / {shapes_targets:summary.bunny_sdf_chamfer_l1:.5f} "
    "{stale:shapes_targets} " f"| [shapes](docs/shapes.md#what-the-cpu-config-reaches-in-5-minutes) · [record]({R}shapes_targets.json) |",
    "| `enerf data colmap` on fern's 20 photos | {colmap_fern:summary.registered}/{colmap_fern:summary.photos} "
    "registered; camera centres within {colmap_fern:summary.centre_error_median_pct:.2f} %, rotations within "
    "{colmap_fern:summary.rotation_error_median_deg:.2f}° of the release's (median){stale:colmap_fern} "
    f"| [data](docs/data.md#how-close-to-the-published-poses) · [record]({R}colmap_fern.json) |",
    "| BN + E on a small CNN (8 × 8 digits, 5 seeds) | {classify_digits:summary.bn_e_points_below_bn_min:.2f}–"
    "{classify_digits:summary.bn_e_points_below_bn_max:.2f} points of accuracy below BN{stale:classify_digits} "
    f"| [conditioning]({D}#beyond-mlps-handwritten-digits) · [record]({R}classify_digits.json) |",
    "| 2 processes (torchrun, gloo) vs 1, on 2 cores | ×{distributed:summary.speed_ratio_2_over_1:.2f} steps/s "
    "{stale:distributed} " f"| [scale out](docs/scale-out.md#what-it-buys) · [record]({R}distributed.json) |",
    "| on one GPU: the CPU capture preset (`--preset cpu`, `configs/capture_cpu.txt`) on the fox, 90 s of training | {gpu_capture:runs.fox.psnr:.2f} dB in "
    "{gpu_capture:runs.fox.steps:,} steps{stale:gpu_capture} "
    f"| [gpu](docs/gpu.md#the-cpu-preset-on-a-gpu) · [record]({R}gpu_capture.json) |",
]
template_table("results", "| what | figure | where |\n|---|---|---|", RESULTS)
# docs/conditioning.md's table: the README's conditioning rows, without their links column.
template_table("conditioning", "| what | figure |\n|---|---|",
               [re.sub(r" \| \[[^|]*\|$", " |", row) for row in RESULTS if "#conditioning" in row or "conditioning.md" in row])
















@figure("demo_minutes", "demo")
def demo_minutes() -> str:
    """The demo's wall time in minutes, one decimal."""
    return f"{record('demo')['summary']['wall_seconds'] / 60:.1f}"






@table("scoring", "scoring")
def scoring() -> str:
    """docs/train.md's table: scoring every held-out view of a trained capture, and the final scoring's
    share of the training time in the 10-minute run that made it."""
    rec = record("scoring")
    rows = ["| capture | held-out views × pixels | scoring (render + metrics) | per view | held-out PSNR "
            "| the run's final scoring ÷ its training time |", "|---|---|---|---|---|---|"]
    for name, s in rec["summary"].items():
        run = rec.get("runs", {}).get(name)
        share = f"{run['final_evaluation_share'] * 100:.1f} % of {run['train_seconds'] / 60:.0f} min" if run else "–"
        rows.append(f"| {name} | {s['views']} × {s['width']} × {s['height']} | {s['seconds']:.0f} s "
                    f"| {s['seconds_per_view']:.1f} s | {s['psnr']:.2f} dB | {share} |")
    return "\n".join(rows)


@table("colmap_fern", "colmap_fern")
def colmap_fern() -> str:
    """docs/data.md's table: fern's photos posed by ``enerf data colmap`` against the release, per seed."""
    rows = ["| seed | whole command | registered | reprojection error | centre error, median / max "
            "| rotation error, median / max | near / far bounds ÷ release's | focal ÷ release's |",
            "|---|---|---|---|---|---|---|---|"]
    for s in record("colmap_fern")["seeds"]:
        rows.append(f"| {s['seed']} | {s['seconds']:.1f} s | {s['registered']} / {s['photos']} | "
                    f"{s['reprojection_px']:.2f} px | {s['centre_pct'][0]:.2f} % / {s['centre_pct'][1]:.2f} % | "
                    f"{s['rotation_deg'][0]:.2f}° / {s['rotation_deg'][1]:.2f}° | "
                    f"{s['near_ratio'][0]:.2f}–{s['near_ratio'][1]:.2f} / {s['far_ratio'][0]:.2f}–{s['far_ratio'][1]:.2f} "
                    f"| {s['focal_ratio']:.3f} |")
    return "\n".join(rows)






@table("configs", "demo", "fern_cpu", "lego_cpu")
def configs() -> str:
    """docs/train.md's table: what the configs reach in their time (held-out PSNR, steps, wall time)."""
    demo, fern, lego = record("demo"), record("fern_cpu")["runs"], record("lego_cpu")["rerun"]
    rows = ["| command | held-out PSNR | steps | training time; wall time in all |", "|---|---|---|---|",
            f"| `enerf train --config configs/demo.txt` | {demo['psnr']:.2f} dB | {demo['steps']:,} | "
            f"{demo['train_seconds']:.0f} s; {demo['wall_seconds']:.0f} s, peak RSS {demo['peak_rss_gib']:.2f} GiB |"]
    for run in fern:
        rows.append(f"| `python -m benchmarks.real --scene fern --seed {run['seed']}` | {run['psnr']:.2f} dB | "
                    f"{run['steps']:,} | {run['train_seconds']:.0f} s; {run['wall_seconds'] / 60:.1f} min |")
    rows.append(f"| `python -m benchmarks.real --scene lego` | {lego['psnr']:.2f} dB | {lego['steps']:,} | "
                f"{lego['train_seconds']:.0f} s; {lego['wall_seconds'] / 60:.1f} min |")
    return "\n".join(rows)


@table("gpu_check", "gpu_check_h100")
def gpu_check() -> str:
    """docs/gpu.md's table: fern's short training runs per renderer and conditioning, one GPU."""
    rows = ["| renderer | conditioning | steps | held-out PSNR | training rays / s | median step | peak GPU memory |",
            "|---|---|---|---|---|---|---|"]
    for r in record("gpu_check_h100")["training"]["runs"]:
        rows.append(f"| {r['renderer']} | {r['conditioning']} | {r['steps']:,} | {r['psnr']:.2f} dB | "
                    f"{r['rays_per_second']:,.0f} | {r['median_step_seconds'] * 1000:.1f} ms | "
                    f"{r['peak_gpu_memory_mib']:,.0f} MiB |")
    return "\n".join(rows)


@figure("nerfacc_max_diff", "gpu_check_h100")
def nerfacc_max_diff() -> str:
    """The largest difference of rgb, acc or depth between nerfacc and torch_grid on the promised rays."""
    cases = record("gpu_check_h100")["equality"]
    return f"{max(v for c in cases for v in c['max_abs_diff'].values()):.1e}"


@table("gpu_capture", "gpu_capture")
def gpu_capture() -> str:
    """docs/gpu.md's second table: the CPU capture preset on one GPU, 90 s of training."""
    rows = ["| capture | held-out PSNR | steps in the training time | wall time (loading · training loop · "
            "final evaluation) |", "|---|---|---|---|"]
    for name, r in record("gpu_capture")["runs"].items():
        w = r["wall_seconds"]
        rows.append(f"| {name} | {r['psnr']:.2f} dB | {r['steps']:,} in {r['train_seconds']:.0f} s | "
                    f"{w['total']:.0f} s ({w['load']:.1f} · {w['train']:.1f} · {w['eval']:.1f}) |")
    return "\n".join(rows)


@table("mesh_accuracy", "mesh_accuracy")
def mesh_accuracy() -> str:
    """docs/mesh.md's table: each mesh method scored against the synthetic scene's known surfaces."""
    rows = ["| method | faces | Chamfer-L1 | accuracy | completeness | normal consistency | F-score |",
            "|---|---|---|---|---|---|---|"]
    for m in record("mesh_accuracy")["methods"]:
        rows.append(f"| `{m['method']}` | {m['faces']:,} | {m['chamfer_l1']:.4g} | {m['accuracy']:.4g} | "
                    f"{m['completeness']:.4g} | {m['normal_consistency']:.4g} | {m['fscore']:.4g} |")
    return "\n".join(rows)


@table("marcher_race", "marcher_race")
def marcher_race() -> str:
    """docs/render.md's table: the occupancy grid raced against the hierarchical sampler, per seed."""
    seeds = record("marcher_race")["seeds"]
    names = sorted(seeds, key=int)
    rows = ["| seed | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]

    def row(label, cell):
        rows.append(f"| {label} | " + " | ".join(cell(seeds[n]) for n in names) + " |")

    row("hierarchical: held-out PSNR after its training time", lambda s: f"{s['hierarchical']['psnr']:.2f} dB "
        f"({s['hierarchical']['steps']:,} steps in {s['hierarchical']['train_seconds']} s)")
    row("torch_grid: training time to that PSNR", lambda s: (
        f"{s['torch_grid']['seconds_to_target']} s ({s['torch_grid']['steps_to_target']:,} steps)"
        if s["torch_grid"]["reached"] else f"not within {s['torch_grid']['final_train_seconds']} s: "
        f"{s['torch_grid']['final_psnr']:.2f} dB ({s['torch_grid']['steps']:,} steps)"))
    row("network queries per training ray (hierarchical: 32)", lambda s: f"{s['torch_grid']['queries_per_ray_final']:.2f}:"
        f" {s['torch_grid']['fewer_queries_final']:.2f}× fewer")
    row("`row` / `none` time per training step (median of pairs)",
        lambda s: f"{s['overhead']['ratio_row_over_none']:.3f}")
    return "\n".join(rows)


@table("viewer", "viewer")
def viewer() -> str:
    """docs/view.md's table: the viewer's time from a camera move to each frame, per scene."""
    rows = ["| scene (steps trained) | renderer | first preview | 256-px draft (CPU), from the move | exact frame (CPU), "
            "from the move | draft vs exact |", "|---|---|---|---|---|---|"]
    for r in record("viewer")["rows"]:
        rows.append(f"| {r['scene']}, {r['size']} ({r['step']:,}) | {r['renderer']} | {r['preview_s']:.2f} s, "
                    f"{r['preview_width']} px wide | {r['draft_s']:.2f} s ({r['cpu_draft_s']:.2f} s), {r['to_draft_s']:.2f} s "
                    f"| {r['final_s']:.2f} s ({r['cpu_final_s']:.2f} s), {r['to_final_s']:.2f} s, "
                    f"{r['final_width']}x{r['final_height']} | {r['draft_psnr']:.1f} dB |")
    return "\n".join(rows)


@table("shapes_targets", "shapes_targets")
def shapes_targets() -> str:
    """docs/shapes.md's first table: each shape network after its training time."""
    rows = ["| shape | network | steps | IoU | Chamfer-L1 | NC | F-score | IoU ≥ 0.95 / Chamfer-L1 ≤ 0.005 first seen |",
            "|---|---|---|---|---|---|---|---|"]
    for r in record("shapes_targets")["rows"]:
        met = r["first_met"]
        rows.append(f"| {r['shape']} | {r['kind']} | {r['steps']:,} | {r['iou']:.4f} | {r['chamfer_l1']:.5f} | "
                    f"{r['normal_consistency']:.4f} | {r['fscore']:.3f} | {met['train_seconds']} s (step {met['step']:,}) |")
    return "\n".join(rows)


@figure("shape_mesh_seconds", "shapes_targets")
def shape_mesh_seconds() -> str:
    """The range of `enerf shape mesh --resolution 128`'s wall times over the runs (the benchmark's, one thread)."""
    times = [r["mesh_128_seconds"] for r in record("shapes_targets")["rows"]]
    return f"{min(times):.1f}–{max(times):.1f}"


@table("shapes_compare", "shapes_compare")
def shapes_compare() -> str:
    """docs/shapes.md's second table: conditioning modes on three shapes, mean ± std over seeds, Δ vs none."""
    def stat(values, digits):
        mean = sum(values) / len(values)
        std = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
        return f"{mean:.{digits - 1 if round(abs(mean), digits) >= 1 else digits}f} ± {std:.{digits}f}"  # 4 significant
    rows = ["| shape | mode | IoU | Chamfer-L1 | NC | F-score | Δ IoU | Δ Chamfer-L1 |", "|---|---|---|---|---|---|---|---|"]
    for r in record("shapes_compare")["rows"]:
        delta = ("| | |" if r["mode"] == "none" else
                 f"| {fmt(r['iou_delta'], '+.4f')} | {fmt(r['chamfer_l1_delta'], '+.5f')} |")
        rows.append(f"| {r['shape']} | {r['mode']} | {stat(r['iou'], 4)} | {stat(r['chamfer_l1'], 5)} | "
                    f"{stat(r['normal_consistency'], 4)} | {stat(r['fscore'], 4)} {delta}")
    return "\n".join(rows)


@table("distributed", "distributed")
def distributed() -> str:
    """docs/scale-out.md's table: training steps per second on 1 and 2 processes."""
    results = record("distributed")["results"]
    rows = ["| processes | threads each | steps/s, median (range) |", "|---|---|---|"]
    for n, r in sorted(results.items(), key=lambda kv: int(kv[0])):
        ratio = "" if n == "1" else f": ×{r['steps_per_s_median'] / results['1']['steps_per_s_median']:.2f}"
        rows.append(f"| {n} | {r['threads_per_process']} | {r['steps_per_s_median']:.2f} "
                    f"({min(r['steps_per_s']):.2f}–{max(r['steps_per_s']):.2f}){ratio} |")
    return "\n".join(rows)












@table("paper", "paper_study")
def paper() -> str:
    """docs/paper.md's table: row against vanilla with the paper's networks (held-out PSNR; IoU on shapes)."""
    s = record("paper_study")["summary"]
    rows = ["| setting | vanilla | row | Δ [95 % CI] |", "|---|---|---|---|"]
    for scene in ("fern", "lego"):
        n = s["nerf"]
        rows.append(f"| {scene}, the paper's NeRF, held-out PSNR | {s['nerf_means'][scene + '_none']:.2f} dB | "
                    f"{s['nerf_means'][scene + '_row']:.2f} dB | {fmt(n[scene + '_delta'], '+.2f')} dB "
                    f"[{fmt(n[scene + '_ci_low'], '+.2f')}, {fmt(n[scene + '_ci_high'], '+.2f')}] |")
    for kind in ("occupancy", "sdf"):
        k = s[kind]
        for mesh in ("bunny", "armadillo", "fandisk"):
            rows.append(f"| {mesh}, {kind} network, IoU | {k[mesh + '_none']:.4f} | {k[mesh + '_row']:.4f} | "
                        f"{fmt(k[mesh + '_delta'], '+.4f')} [{fmt(k[mesh + '_ci_low'], '+.4f')}, "
                        f"{fmt(k[mesh + '_ci_high'], '+.4f')}] |")
    for name, r in s["kappa_ratio_row"].items():
        rows.append(f"| κ(EW) / κ(W) of `row`'s matrices, {name} | | {r['min']:.3f}–{r['max']:.3f} | |")
    return "\n".join(rows)
