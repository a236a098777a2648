"""The README and docs/: every relative link and anchor resolves, the README stays short, its set-up
commands are the ones CI runs, and its Python example runs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code spans (links there are not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


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
    install and test commands of .ci/run."""
    block = re.search(r"^```bash\n(.*?)^```", README.read_text(), re.M | re.S).group(1).splitlines()
    commands = [[c.strip() for c in line.split("#")[0].split("&&")] for line in block]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.startswith("python3 ")]
    assert commands[0][0] == "python3 -m pip install -e ."
    assert shlex.split(commands[0][1])[:2] == ["enerf", "train"]
    assert commands[1] == ci


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
