"""The splat page's size and look against the float32 page it replaced, on baked captures, in headless
Chromium (SwiftShader, 640 x 480).

    python -m benchmarks.page_size --runs runs/capture_splats --names fox boardgame beer \\
        --baseline ce179d5 --record benchmarks/page_size.json

Per capture (``RUNS/NAME/splats.ply`` and its checkpoint): ``enerf export html --splats ... --ckpt ...``
with this tree's code and with the code of commit ``--baseline`` (``git archive`` into a temporary
folder, run from there, on a copy of the checkpoint with the keys that code knows), the two pages' sizes, then both opened at ``--views`` of their cameras spread
over the list (the run's training and held-out cameras), each waited to its full frame with the HUD
hidden: the screenshots' PSNR (new against baseline, over the whole 640 x 480 window), and
``--moves`` mouse-drag orbits of the new page timed from the input event to its first frame
(``benchmarks.splat_page``'s measure); the lowest camera's screenshots side by side (``OUT/NAME_worst.png``,
new | baseline) and the splats far out and nearly opaque (``horizon``), which a page must draw at any range. Targets (issue 64): the page at most 1/4 of the baseline's,
every screenshot at least 35 dB against the baseline's, a move answered within 0.2 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import ROOT, command_line, git_commit, load_average, machine, write_record
from benchmarks.splat_page import CHROMEDRIVER, CHROMIUM, drag_and_wait, move_and_wait, open_chromium, open_page

DEPENDS = ["enerf/splats/html.py", "enerf/splats/pagepack.py", "enerf/splats/decode.js", "enerf/splats/page.js",
           "enerf/splats/renderer.js"]


def _export(code: Path, splats: Path, ckpt: Path, out: Path) -> None:
    """``enerf export html`` with the package found in ``code`` (run from there, ahead of the installed one)."""
    cmd = [sys.executable, "-m", "enerf", "export", "html", "--splats", str(splats.resolve()), "--ckpt",
           str(ckpt.resolve()), "--out", str(out.resolve())]
    subprocess.run(cmd, cwd=code, check=True, capture_output=True, text=True)


_BASELINE_FIELDS = ("import dataclasses, json; from enerf.config import nerf; print(json.dumps({s: [f.name for f in "
                    "dataclasses.fields(getattr(nerf, c))] for s, c in (('data', 'DataConfig'), ('field', 'FieldConfig'), "
                    "('render', 'RenderConfig'), ('train', 'TrainConfig'))}))")


def _baseline_checkpoint(code: Path, ckpt: Path, out: Path) -> Path:
    """``ckpt`` written so that the code in ``code`` reads it: renamed keys under their old names, keys that code
    does not know dropped (only the cameras and the scene's frame are read from it for a page)."""
    import json

    import torch

    from enerf.config.nerf import RENAMED_KEYS

    known = json.loads(subprocess.run([sys.executable, "-c", _BASELINE_FIELDS], cwd=code, check=True,
                                      capture_output=True, text=True).stdout)
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    for section, names in known.items():
        old_name = {new: old for old, new in RENAMED_KEYS.get(section, {}).items()}
        values = {old_name.get(k, k): v for k, v in state["config"][section].items()}
        state["config"][section] = {k: v for k, v in values.items() if k in names}
    torch.save(state, out)
    return out


def _screenshot(driver) -> np.ndarray:
    import imageio.v3 as iio

    return iio.imread(driver.get_screenshot_as_png())[..., :3].astype(np.float64) / 255.0


def _write_png(path: Path, image: np.ndarray) -> None:
    import imageio.v3 as iio

    iio.imwrite(path, (np.clip(image, 0.0, 1.0) * 255).round().astype(np.uint8))


def _horizon(splats: Path) -> dict:
    """The splats far out and nearly opaque (a bake's horizon): the count of those with opacity at least 0.5
    lying more than 10^4 median distances from the median centre, their largest distance and standard deviation
    (the file's units)."""
    from enerf.splats.files import read_splat_file

    s = read_splat_file(splats)
    s = s[0] if isinstance(s, tuple) else s
    means = s.means.double().numpy()
    dist = np.linalg.norm(means - np.median(means, 0), axis=1)
    far = (dist > 1e4 * np.median(dist)) & (s.opacities.double().numpy() >= 0.5)
    sigma = s.log_scales.double().exp().max(1).values.numpy()
    return {"count": int(far.sum()), "distance_max": float(dist[far].max()) if far.any() else 0.0,
            "sigma_max": float(sigma[far].max()) if far.any() else 0.0,
            "opacity_mean": float(s.opacities.double().numpy()[far].mean()) if far.any() else 0.0}


def _views(driver, page: Path, cameras: list[int]) -> list[np.ndarray]:
    open_page(driver, page)
    driver.execute_script("window.enerfSplat.showHud(false)")
    shots = []
    for i in cameras:
        move_and_wait(driver, i, full=True)
        shots.append(_screenshot(driver))
    return shots


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/capture_splats"))
    parser.add_argument("--names", nargs="+", default=["fox", "boardgame", "beer"])
    parser.add_argument("--baseline", default="ce179d5", help="the commit whose page is compared against")
    parser.add_argument("--views", type=int, default=6)
    parser.add_argument("--moves", type=int, default=6)
    parser.add_argument("--out", type=Path, default=Path("runs/page_size"), help="where the pages are written")
    parser.add_argument("--record", type=Path)
    args = parser.parse_args(argv)
    if CHROMIUM is None or CHROMEDRIVER is None:
        parser.error("no headless browser: apt-get install -y chromium chromium-driver")
    load_before = load_average()
    args.out.mkdir(parents=True, exist_ok=True)
    captures = {}
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", args.baseline, "enerf"], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        driver = open_chromium(640, 480)
        try:
            for name in args.names:
                run = args.runs / name
                splats, ckpt = run / "splats.ply", next((run / "checkpoints").glob("*.pt"))
                pages = {"new": args.out / f"{name}.html", "baseline": args.out / f"{name}_baseline.html"}
                start = time.perf_counter()
                _export(ROOT, splats, ckpt, pages["new"])
                export_s = time.perf_counter() - start
                old_ckpt = _baseline_checkpoint(Path(tmp), ckpt, Path(tmp) / f"{name}.pt")
                _export(Path(tmp), splats, old_ckpt, pages["baseline"])
                open_page(driver, pages["new"])
                count = driver.execute_script("return JSON.parse(document.getElementById('enerf-header').textContent)"
                                              ".cameras.length")
                cameras = sorted({int(i) for i in np.linspace(0, count - 1, args.views).round()})
                shots = {k: _views(driver, p, cameras) for k, p in pages.items()}
                psnr = [float(-10 * np.log10(max(np.mean((a - b) ** 2), 1e-12)))
                        for a, b in zip(shots["new"], shots["baseline"])]
                open_page(driver, pages["new"])
                moves = [drag_and_wait(driver, -200)["lastMoveMs"] / 1000 for _ in range(args.moves)]
                sizes = {k: p.stat().st_size for k, p in pages.items()}
                worst = int(np.argmin(psnr))  # the lowest camera's two screenshots side by side, new | baseline
                _write_png(args.out / f"{name}_worst.png",
                           np.concatenate([shots["new"][worst], shots["baseline"][worst]], 1))
                captures[name] = {
                    "splats": str(splats), "page_bytes": sizes["new"], "baseline_bytes": sizes["baseline"],
                    "ratio": sizes["new"] / sizes["baseline"], "export_s": export_s, "cameras": cameras,
                    "psnr_vs_baseline": psnr, "psnr_min": min(psnr), "move_s": moves,
                    "move_s_median": statistics.median(moves), "move_s_max": max(moves),
                    "worst_camera": cameras[worst], "worst_picture": str(args.out / f"{name}_worst.png"),
                    "horizon": _horizon(splats)}
                c = captures[name]
                print(f"{name}: page {c['page_bytes'] / 1e6:.2f} MB against {c['baseline_bytes'] / 1e6:.2f} MB "
                      f"({c['ratio']:.3f}); screenshots {min(psnr):.1f}-{max(psnr):.1f} dB against the baseline's; "
                      f"move {c['move_s_median']:.3f} s median, {c['move_s_max']:.3f} s max", flush=True)
        finally:
            driver.quit()
    version = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip()
    record = {"command": command_line(), "machine": machine(), "commit": git_commit(), "depends": DEPENDS,
              "baseline": args.baseline, "chromium": version, "canvas": [640, 480], "captures": captures,
              "targets": {"ratio": 0.25, "psnr_min": 35.0, "move_s": 0.2},
              "load_before": load_before, "load_after": load_average()}
    if args.record:
        write_record(args.record, record)
    return record


if __name__ == "__main__":
    main()
