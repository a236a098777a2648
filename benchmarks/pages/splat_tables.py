"""The user pages' tables and figures of the splats (docs/splats.md, docs/captures.md): the named tables the pages
mark, registered as ``benchmarks.pages.tables``'s are."""

from __future__ import annotations

from benchmarks import capture_splats, splats
from benchmarks.pages.records import figure, fmt, markdown, record, table

__all__: list[str] = []


@table("capture_splats", "capture_splats")
def capture_splats_table() -> str:
    """docs/splats.md's and docs/captures.md's table: each capture's run ending in splats, the field and the
    splats on the same held-out views (``benchmarks.capture_splats.table``)."""
    return capture_splats.table(record("capture_splats"))


@table("capture_splats_far", "capture_splats_far")
def capture_splats_far_table() -> str:
    """docs/splats.md's and docs/captures.md's table: the same runs with ``--holdout far`` (``benchmarks.capture_splats``)."""
    return capture_splats.table(record("capture_splats_far"))


@table("capture_splats_half", "capture_splats")
def capture_splats_half() -> str:
    """docs/splats.md's table: the field and its splats at half the training size (``benchmarks.half_size``)."""
    def cells(name: str, half: dict) -> list[str]:
        lose = sum(v["splats"] < v["field"] for v in half["views"])
        return [name, f"{half['field']:.2f} dB", f"{half['splats']:.2f} dB",
                f"{fmt(half['splats'] - half['field'], '+.2f')} dB", f"{lose} of {len(half['views'])}"]

    return markdown(["capture", "field", "splats", "Δ", "views where the splats lose"],
                    [cells(name, e["half_size"]) for name, e in record("capture_splats")["entries"].items()
                     if e.get("half_size")])


@table("capture_splats_files", "splat_files")
def capture_splats_files() -> str:
    """docs/splats.md's table: each run's splats as .spz and .splat against its PLY (``benchmarks.splat_files``)."""
    def cells(name: str, f: dict) -> list[str]:
        mb = {k: f[k]["bytes"] / 2**20 for k in ("ply", "spz", "splat")}
        return [name, f"{mb['ply']:.1f} MB"] + [
            cell for kind in ("spz", "splat") for cell in (f"{mb[kind]:.1f} MB ({f[kind]['size_ratio']:.3f})",
                                                           f"{fmt(f[kind]['delta_psnr'], '+.3f')} dB")]

    return markdown(["capture", "PLY", ".spz (÷ PLY)", ".spz Δ PSNR", ".splat (÷ PLY)", ".splat Δ PSNR"],
                    [cells(name, f) for name, f in record("splat_files")["entries"].items() if f])


@table("splat_antialias", "splat_antialias")
def splat_antialias_table() -> str:
    """docs/splats.md's table: one checkpoint baked classic and with the 2D mip filter (``benchmarks.splat_antialias``),
    at the training size and at half of it, and the filtered file drawn by a renderer without the filter."""
    def cells(name: str, e: dict) -> list[str]:
        c, a = e["variants"]["classic"], e["variants"]["antialiased"]
        drawn = f"{a['drawn_classic']['psnr']:.2f} dB" if "drawn_classic" in a else "not measured"
        return [name, *(f"{x:.2f} dB" for x in (e["field"], c["psnr"], a["psnr"])), drawn,
                *(f"{x:.2f} dB" for x in (e["field_half"], c["psnr_half"], a["psnr_half"]))]

    return markdown(["capture", "field", "classic", "antialiased", "antialiased, drawn classic", "field at 1/2",
                     "classic at 1/2", "antialiased at 1/2"],
                    [cells(name, e) for name, e in record("splat_antialias")["entries"].items()])


@table("splats", "splats")
def splats_table() -> str:
    """docs/splats.md's table: the field against its splats, per capture (``benchmarks.splats.table``)."""
    return splats.table(record("splats"))


@table("fit_rate", "fit_rate")
def fit_rate_table() -> str:
    """docs/splats.md's table: the splat fit's steps per second on 1 and 2 threads (``benchmarks.fit_rate``)."""
    return markdown(["capture", "splats", "1 thread", "2 threads", "2 ÷ 1"],
                     [[name, f"{e['splats']:,}", f"{e['steps_per_second']['1']:.1f} steps/s",
                       f"{e['steps_per_second']['2']:.1f} steps/s",
                       f"×{e['steps_per_second']['2'] / e['steps_per_second']['1']:.2f}"]
                      for name, e in record("fit_rate")["entries"].items()])


@table("page_size", "page_size")
def page_size_table() -> str:
    """docs/splats.md's table: each run's splats as a page, against the float32 page the quantised one replaced
    (``benchmarks.page_size``): sizes, the screenshots' PSNR against the float32 page's, a drag's first frame."""
    return markdown(
        ["capture", "page", "float32 page", "÷", "screenshots against the float32 page's", "a drag → its first frame"],
        [[name, f"{c['page_bytes'] / 1e6:.2f} MB", f"{c['baseline_bytes'] / 1e6:.2f} MB", f"{c['ratio']:.3f}",
          f"{min(c['psnr_vs_baseline']):.1f}–{max(c['psnr_vs_baseline']):.1f} dB ({len(c['psnr_vs_baseline'])} cameras)",
          f"{c['move_s_median']:.3f} s median, {c['move_s_max']:.3f} s max"]
         for name, c in record("page_size")["captures"].items()])


@table("splat_clean", "splat_clean")
def splat_clean_table() -> str:
    """docs/splats.md's table: the floater filter and a crop on each run's splats (``benchmarks.splat_clean``)."""
    def delta(r: dict) -> str:
        return f"{fmt(r['delta_psnr'], '+.3f')} ({fmt(r['worst_view_delta'], '+.3f')}) dB"

    return markdown(
        ["capture", "splats", "`--min_contribution` removes", "Δ PSNR (worst view)", "the crop removes",
         "Δ PSNR where it keeps the scene (worst view)"],
        [[name, f"{e['splats']:,}", f"{e['floaters']['removed']:,}", delta(e["floaters"]), f"{e['crop']['removed']:,}",
          delta(e["crop"])] for name, e in record("splat_clean")["entries"].items()])


@figure("splat_clean_99_loss", "splat_clean_99")
def splat_clean_99_loss() -> str:
    """The lowest and the highest change of PSNR a crop holding 99 % of the centres makes, in dB: "A to B" (signed)."""
    deltas = [e["crop"]["delta_psnr"] for e in record("splat_clean_99")["entries"].values()]
    return f"{fmt(min(deltas), '+.2f')} to {fmt(max(deltas), '+.2f')}"


@figure("splat_page_mb", "splat_page")
def splat_page_mb() -> str:
    """The size of the measured splat page in MB (10^6 bytes), one decimal."""
    return f"{record('splat_page')['page_bytes'] / 1e6:.1f}"


def _near_unseen_deltas(name: str) -> list[float]:
    """Entry NAME of near_unseen.json: each held-out view's PSNR with the 1 % pick dropped, minus as baked (dB)."""
    return [v["0.01"] - v["as_is"] for v in record("near_unseen")["entries"][name]["views"]]


@figure("near_unseen_gain", "near_unseen")
def near_unseen_gain() -> str:
    """The most the 1 % pick's drop gives one of the boardgame's every-8th views (view 88), in dB: "+X.X"."""
    return fmt(max(_near_unseen_deltas("boardgame")), "+.1f")


@figure("near_unseen_loss", "near_unseen")
def near_unseen_loss() -> str:
    """The least and the most the beer's far views lose to the 1 % pick's drop (views losing more than 1 dB, both far
    runs), in whole dB: "A to B"."""
    losses = [-d for name in ("beer_far", "beer_far_rerun") for d in _near_unseen_deltas(name) if d < -1.0]
    return f"{min(losses):.0f} to {max(losses):.0f}"
