"""The README, docs/ and the record (benchmarks/): every relative link and anchor resolves, the README
stays short, its set-up commands are the ones CI runs, its Python example runs, the records' summaries
agree with their detail, the commands the user pages show exist with the flags they name, and the user
pages carry no record material (long decimals, commit hashes, the CPU lock). That the pages' figures
are the records': tests/unit/test_pages.py."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
USER_PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
PAGES = [*USER_PAGES, ROOT / "benchmarks" / "README.md"]

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


# -- user pages: commands that exist, no record material -----------------------------------------


def _help(argv: list[str]) -> str:
    """What ``enerf ARGV --help`` prints ("" for a command that does not exist)."""
    from enerf.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main([*argv, "--help"])
        except SystemExit:
            pass
    return out.getvalue()


def fenced_commands(text: str, runnable: bool = False) -> list[str]:
    """Command lines of fenced blocks (continuations joined, comments and "$ " prompts dropped);
    ``runnable``: leave out blocks that show refused commands (their ``error:`` lines)."""
    lines = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S):
        if runnable and re.search(r"^\S+: error:", block, re.M):
            continue
        for line in block.replace("\\\n", " ").splitlines():
            lines.append(re.sub(r"^\$ ", "", line.split("  #")[0].strip()))
    return [line for line in lines if line]


def shown_commands(text: str) -> list[str]:
    """Command lines of fenced blocks and inline code spans."""
    spans = [span.strip("`") for span in INLINE_CODE.findall(FENCE.sub("", text))]
    return fenced_commands(text) + [span for span in spans if span]


def _flags(tokens: list[str]) -> tuple[list[str], list[str]]:
    """The ``--flags`` among ``tokens``, before and after a bare ``--``."""
    words = [t.strip("[]{}(),") for t in tokens]
    cut = words.index("--") if "--" in words else len(words)

    def pick(ws: list[str]) -> list[str]:
        return [w.split("=")[0] for w in ws if re.fullmatch(r"--[A-Za-z][\w-]*(=.*)?", w)]

    return pick(words[:cut]), pick(words[cut + 1:])


def _listed(flag: str, help_text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text) is not None


class Parsed(Exception):
    """Raised by :func:`parse_only` in place of running a command: its parsed arguments."""

    def __init__(self, namespace):
        super().__init__("parsed")
        self.namespace = namespace


@contextlib.contextmanager
def parse_only():
    """Every argparse / configargparse parser stops after its first complete ``parse_args``: a
    command line is parsed exactly as the program would parse it (types, choices, required
    arguments, config files) and :class:`Parsed` carries the namespace out, before any work."""
    import argparse
    from unittest import mock

    import configargparse

    depth = 0

    def stopping(original):
        def parse_args(self, *args, **kwargs):
            nonlocal depth
            depth += 1
            try:
                namespace = original(self, *args, **kwargs)
            finally:
                depth -= 1
            if depth == 0:
                raise Parsed(namespace)
            return namespace
        return parse_args

    with contextlib.ExitStack() as stack:
        for cls in (argparse.ArgumentParser, configargparse.ArgumentParser):
            stack.enter_context(mock.patch.object(cls, "parse_args", stopping(cls.__dict__["parse_args"])))
        yield


def parse_problem(call) -> tuple[object, str | None]:
    """(namespace, None) when ``call()`` parses its command line; (None, the parser's message)
    when the parser refuses it."""
    from enerf.errors import EnerfError

    err = io.StringIO()
    try:
        with parse_only(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            call()
    except Parsed as done:
        return done.namespace, None
    except (EnerfError, SystemExit) as exc:
        return None, (err.getvalue().strip().splitlines() or [str(exc)])[-1]
    return None, "returned without parsing a command line"


def script_problems(tokens: list[str]) -> list[str]:
    """``python -m benchmarks.NAME ARGS`` / ``python -m studies.NAME ARGS``: the module exists and
    its own parser accepts ARGS (parsed in this process, nothing run)."""
    import importlib
    import inspect
    from unittest import mock

    start = tokens.index("-m") + 1
    name, args = tokens[start], tokens[start + 1:]
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        return [f"no module {name} ({exc})"]
    takes_argv = any(p.default is p.empty for p in inspect.signature(module.main).parameters.values())
    with mock.patch.object(sys, "argv", [module.__file__, *args]):
        _, problem = parse_problem(lambda: module.main(args) if takes_argv else module.main())
    return [f"{name}: {problem}"] if problem else []


def enerf_problems(tokens: list[str], helps: dict[tuple[str, ...], str], parse: bool = False) -> list[str]:
    """``enerf COMMAND [ACTION] FLAGS [-- TRAIN FLAGS]``: the command exists and its ``--help``
    lists each flag; flags after ``--`` of ``enerf compare`` go to ``enerf train`` (``enerf shape
    train`` with ``--task shape``). ``parse``: also parse the whole line (a complete command, as
    in a fenced block; an inline span may name a command with only some of its flags)."""
    rest = tokens[tokens.index("enerf") + 1:]
    if not rest or rest[0] in ("--version", "--help", "..."):
        return []
    two_word = rest[0] in ("shape", "data", "export") and len(rest) > 1 and not rest[1].startswith("-")
    command = tuple(rest[:2] if two_word else rest[:1])
    run_command = ("shape", "train") if "--task shape" in " ".join(rest) else ("train",)  # what compare runs
    for key in (command, run_command):
        if key not in helps:
            helps[key] = _help(list(key))
    if not helps[command]:
        return [f"no command enerf {' '.join(command)}"]
    before, after = _flags(rest[len(command):])
    problems = [f"enerf {' '.join(command)} has no {f}" for f in before if not _listed(f, helps[command])]
    if command == ("compare",):
        problems += [f"enerf {' '.join(run_command)} has no {f}" for f in after if not _listed(f, helps[run_command])]
    if problems or not parse or "--help" in rest or "..." in rest:
        return problems
    return parse_problems(rest)


def parse_problems(rest: list[str]) -> list[str]:
    """``enerf REST`` parsed by the command's own parser (nothing run); a ``train`` command's
    configuration also built (``run_config_from_args``: the checks across flags, e.g. a fine
    network with a renderer other than hierarchical)."""
    from enerf.cli import COMMANDS, run_config_from_args
    from enerf.errors import EnerfError

    namespace, problem = parse_problem(lambda: COMMANDS[rest[0]](rest[1:]))
    if problem:
        return [problem]
    if rest[0] == "train":
        try:
            run_config_from_args(namespace)
        except EnerfError as exc:
            return [str(exc)]
    return []


def _runs_enerf(before: list[str]) -> bool:
    """Whether the words before ``enerf`` start it: nothing, environment settings, or ``... -m``."""
    return all("=" in w for w in before) or before[-1] == "-m"


def test_commands_on_user_pages_exist_with_their_flags(monkeypatch):
    """Every ``enerf ...`` command shown on a user page names a command that exists and only flags
    its ``--help`` lists; every ``python -m benchmarks.NAME`` / ``studies.NAME`` names a module whose
    parser accepts the arguments shown. Each is parsed as written, from the repository root (the
    config files it names are read), without running it."""
    monkeypatch.chdir(ROOT)
    helps: dict[tuple[str, ...], str] = {}
    bad = []
    for page in USER_PAGES:
        text = page.read_text()
        fenced = {part.strip() for shown in fenced_commands(text, runnable=True) for part in shown.split(" && ")}
        for line in [part.strip() for shown in shown_commands(text) for part in shown.split(" && ")]:
            try:
                tokens = shlex.split(line)
            except ValueError:  # an unbalanced quote in prose code
                tokens = line.split()
            if re.search(r"(^|\s)python3? -m (benchmarks|studies)\.\w+(\s|$)", line):
                problems = script_problems(tokens)
            elif "enerf" in tokens and _runs_enerf(tokens[:tokens.index("enerf")]):
                problems = enerf_problems(tokens, helps, parse=line in fenced)
            else:
                problems = []
            bad += [f"{page.relative_to(ROOT)}: {line}: {p}" for p in problems]
    assert bad == []


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


# -- the walkthrough, run as written on a tiny scene ----------------------------------------------

TINY_TRAIN = ["--preset", "none", "--iters", "3", "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "16",
              "--view_width", "8", "--multires", "2", "--multires_views", "1", "--N_samples", "8", "--N_rand", "64",
              "--no_lpips", "--quiet", "--device", "cpu", "--kappa_every", "0", "--video", "none"]
# tiny settings appended to a command as written (a later flag wins): what a 3-step run can export
TINY_EXPORT = {"pointcloud": ["--min_acc", "0.01"], "tsdf": ["--resolution", "16"]}


def test_walkthrough_commands_run_on_a_tiny_scene(scene_dir, tmp_path, monkeypatch):
    """docs/walkthrough.md's train, depth, point cloud and TSDF mesh commands, as written, on a tiny
    synthetic scene copied to data/my_scene (tiny network and 3 steps appended to the train
    command): the run lands in the folder the page names, the depth export writes one z-depth
    per held-out view, the point cloud and the mesh load back in trimesh."""
    import shutil

    import trimesh

    from enerf.cli import main

    monkeypatch.chdir(tmp_path)
    shutil.copytree(scene_dir, tmp_path / "data" / "my_scene")
    lines = [shlex.split(line) for line in fenced_commands((ROOT / "docs" / "walkthrough.md").read_text())]
    train = next(t for t in lines if t[:3] == ["enerf", "train", "--datadir"] and t[3] == "data/my_scene")
    assert main([*train[1:], *TINY_TRAIN]) == 0
    ckpt = Path("runs/my_scene/checkpoints/latest.pt")
    assert ckpt.is_file()
    exports = [t for t in lines if t[:2] in (["enerf", "export"], ["enerf", "mesh"]) and "--texture" not in t]
    assert len(exports) == 3 and all(t[t.index("--ckpt") + 1] == str(ckpt) for t in exports)
    for tokens in exports:
        extra = TINY_EXPORT.get("tsdf" if "tsdf" in tokens else tokens[2], [])
        assert main([*tokens[1:], *extra, "--quiet"]) == 0, tokens
    held_out = len(range(0, 8, 4))  # the fixture's 8 views, every 4th held out (--llffhold 4)
    assert len(list(Path("runs/my_scene/depth").glob("test_*_z.npy"))) == held_out
    assert len(trimesh.load("runs/my_scene/cloud.ply").vertices) > 0
    assert len(trimesh.load("runs/my_scene/mesh.ply").faces) > 0
