"""The commands the user pages show exist with the flags they name (parsed by the CLI's own parsers), and
docs/walkthrough.md's commands run as written on a tiny scene."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

from doc_pages import FENCE, INLINE_CODE, ROOT, USER_PAGES


# -- user pages: commands that exist --------------------------------------------------------------


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
