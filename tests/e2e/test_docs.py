"""The README, docs/ and the record (benchmarks/): every relative link and anchor resolves, the README
stays short, its set-up commands are the ones CI runs, its Python example runs, the records' summaries
agree with their detail, and the user pages carry no record material (long decimals, commit hashes, the CPU
lock). The commands the pages show: test_doc_commands.py. That the pages' figures are the records':
tests/unit/test_pages.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from doc_pages import FENCE, LINK, PAGES, README, ROOT, USER_PAGES, prose


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (letters of any script,
    digits, ``_`` and ``-`` kept), each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).replace("`", "").lower()
    return "".join(c for c in text if c.isalnum() or c in " _-").replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Anchors of every heading of a Markdown file; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    bad = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            bad.append(f"{target}: {dest} does not exist")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    return bad


def test_slug_matches_github_for_known_headings():
    assert slug("Ray marching with an occupancy grid (`--renderer`)") == "ray-marching-with-an-occupancy-grid---renderer"
    assert slug("Shapes: vanilla vs row / col / rowcol") == "shapes-vanilla-vs-row--col--rowcol"
    assert slug("fern: 23.85 dB after 10 minutes (target 24.0 dB: not met)") == \
        "fern-2385-db-after-10-minutes-target-240-db-not-met"
    assert slug("κ during training") == "κ-during-training"


def test_link_checker_reports_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n\n## Part two\n\n[ok](#part-two) [ok](b.md#b) `[code](nowhere.md)`\n"
                                   "[missing](c.md) [bad anchor](b.md#nope)\n\n```\n[fenced](gone.md)\n```\n")
    (tmp_path / "b.md").write_text("# B\n")
    assert [b.split(":")[0] for b in broken_links(tmp_path / "a.md")] == ["c.md", "b.md#nope"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_and_anchors_resolve(page):
    assert broken_links(page) == []


def test_readme_is_at_most_200_lines():
    assert len(README.read_text().splitlines()) <= 200


def test_readme_set_up_commands_are_what_ci_runs():
    """The README's first code block: line 1 installs and trains the demo, line 2 is exactly the
    install and test commands of .ci/run, which runs them in a fresh venv it makes and activates first."""
    block = re.search(r"^```bash\n(.*?)^```", README.read_text(), re.M | re.S).group(1).splitlines()
    commands = [[c.strip() for c in line.split("#")[0].split("&&")] for line in block]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.startswith(("python3 ", ". "))]
    assert commands[0][0] == "python3 -m pip install -e ."
    assert shlex.split(commands[0][1])[:2] == ["enerf", "train"]
    assert ci[:2] == ["python3 -m venv --clear venv", ". venv/bin/activate"] and commands[1] == ci[2:]
    assert "/venv/" in (ROOT / ".gitignore").read_text().splitlines()


def test_readme_python_example_runs(tmp_path):
    """Every ```python block of the README runs in a scratch folder (its asserts check the results)."""
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.M | re.S)
    assert blocks
    for i, code in enumerate(blocks):
        script = tmp_path / f"example_{i}.py"
        script.write_text(code)
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 0, proc.stderr


# -- the records behind the pages ---------------------------------------------------------------
# (that every marked figure and table on the pages is what the records give: tests/unit/test_pages.py)


def test_records_are_consistent_with_their_detail():
    """Figures the summaries share with the detail of the same record agree."""
    rec = {p.stem: json.loads(p.read_text()) for p in (ROOT / "benchmarks").glob("*.json")}
    race = rec["marcher_race"]
    seeds = race["seeds"]
    fewer = [round(s["hierarchical"]["queries_per_ray"] / s["torch_grid"]["queries_per_ray_final"], 2) for s in seeds.values()]
    rows = [s["overhead"]["ratio_row_over_none"] for s in seeds.values()]
    ratios = [s["torch_grid"]["time_ratio"] for s in seeds.values() if s["torch_grid"]["reached"]]
    short = [s["hierarchical"]["psnr"] - s["torch_grid"]["final_psnr"] for s in seeds.values()
             if not s["torch_grid"]["reached"]]
    assert race["summary"]["speed"] == {"reached": len(ratios), "time_ratio_min": min(ratios, default=None),
                                        "time_ratio_max": max(ratios, default=None),
                                        "short_db_max": max(short, default=None),
                                        "fewer_queries_min": min(fewer), "fewer_queries_max": max(fewer)}
    assert race["summary"]["overhead"] == {"ratio_row_over_none_min": min(rows), "ratio_row_over_none_max": max(rows)}
    for seed in race["seeds"].values():
        hier, grid = seed["hierarchical"], seed["torch_grid"]
        if not grid["reached"]:  # the grid run's cap ended it short of the target
            assert grid["final_psnr"] < hier["psnr"] and grid["time_ratio"] is None
            continue
        assert grid["time_ratio"] == pytest.approx(grid["seconds_to_target"] / hier["train_seconds"], abs=0.006)
        assert grid["fewer_queries"] == pytest.approx(hier["queries_per_ray"] / grid["queries_per_ray_to_target"], abs=0.006)
    fern = rec["fern_cpu"]
    psnrs = [r["psnr"] for r in fern["runs"]]
    assert fern["summary"]["psnr_mean"] == pytest.approx(sum(psnrs) / 3, abs=0.005)
    assert fern["summary"]["peer_psnr"] == fern["peer"]["history"][-1]["psnr"]
    dist = rec["distributed"]["results"]
    assert rec["distributed"]["summary"]["speed_ratio_2_over_1"] == \
        round(dist["2"]["steps_per_s_median"] / dist["1"]["steps_per_s_median"], 2)
    digits = [r for r in rec["classify_digits"]["rows"] if r["method"] == "BN+E"]
    assert rec["classify_digits"]["summary"] == {"bn_e_points_below_bn_min": -max(r["delta"] for r in digits),
                                                 "bn_e_points_below_bn_max": -min(r["delta"] for r in digits)}
    shapes = {(r["shape"], r["kind"]): r for r in rec["shapes_targets"]["rows"]}
    assert list(rec["shapes_targets"]["summary"].values()) == [
        shapes["torus", "occupancy"]["iou"], shapes["bunny", "occupancy"]["iou"],
        shapes["torus", "sdf"]["chamfer_l1"], shapes["bunny", "sdf"]["chamfer_l1"]]
    demo = rec["conditioning_demo"]["modes"]
    for mode in ("none", "row"):
        assert demo[mode]["psnr_mean"] == pytest.approx(sum(demo[mode]["psnr"]) / 3, abs=0.005)


RECORD_MATERIAL = {
    "the CPU lock of the timed runs": re.compile(r"flock|enerf-cpu\.lock"),
    "a commit hash": re.compile(r"\bcommit [0-9a-f]{7,40}\b|git (?:show|checkout) [0-9a-f]{7,40}"),
    "an issue's target": re.compile(r"issue targets?", re.I),
    "a date": re.compile(r"\b20\d\d-\d\d-\d\d\b"),
}


def significant_digits(number: str) -> int:
    return len(number.replace(".", "").lstrip("0"))


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_user_pages_carry_no_record_material(page):
    """Figures to at most 4 significant digits in prose (counts and flag values aside: integers and
    code are not checked), and no CPU lock, commit hash, issue target or date: those belong to
    benchmarks/README.md."""
    text = page.read_text()
    text_prose = prose(text)
    long = [m for m in re.findall(r"(?<![\w.])\d+\.\d+(?![\d.])", text_prose) if significant_digits(m) > 4]
    assert long == [], f"{page.name}: figures beyond 4 significant digits: {long}"
    found = [what for what, pattern in RECORD_MATERIAL.items() if pattern.search(text)]
    assert found == [], f"{page.name} carries {', '.join(found)}"
