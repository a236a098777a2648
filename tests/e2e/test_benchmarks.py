"""benchmarks/ and studies/: every script imports as a package module and answers ``--help``
(nothing run), none edits ``sys.path``, and the shared harness records what it claims."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest

from benchmarks import harness

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(f"{p.parent.name}.{p.stem}" for folder in ("benchmarks", "studies")
                 for p in (ROOT / folder).glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_imports_and_answers_help(name):
    """``python -m NAME --help`` in this process: a script with a ``main`` prints its usage and
    exits 0; a shared module (no ``main``) only imports. No file edits sys.path."""
    source = (ROOT / (name.replace(".", "/") + ".py")).read_text()
    assert "sys.path" not in source
    module = importlib.import_module(name)
    if not hasattr(module, "main"):
        assert name in ("benchmarks.harness", "benchmarks.grid", "studies.mlp_timing")
        return
    out = io.StringIO()
    with mock.patch.object(sys, "argv", [module.__file__, "--help"]), contextlib.redirect_stdout(out), \
            pytest.raises(SystemExit) as exit_:
        takes_argv = module.main.__code__.co_argcount and module.main.__defaults__ is None
        module.main(["--help"]) if takes_argv else module.main()
    assert exit_.value.code in (0, None)
    assert out.getvalue().startswith("usage: ")


def test_harness_command_line_names_the_module():
    """A script run with ``-m`` has its file as argv[0]; the recorded command is the ``-m`` form."""
    argv = [str(ROOT / "benchmarks" / "real.py"), "--scene", "fern", "--seed", "0"]
    assert harness.command_line(argv) == "python -m benchmarks.real --scene fern --seed 0"
    assert harness.command_line([str(ROOT / "studies" / "kappa_shapes.py"), "--out", "a b.json"]) == \
        "python -m studies.kappa_shapes --out 'a b.json'"


def test_harness_record_is_valid_json_and_atomic(tmp_path):
    """write_record: non-finite floats become null (the file is always valid JSON), parents are
    made, and a failure while encoding leaves the earlier record untouched."""
    path = harness.write_record(tmp_path / "sub" / "r.json", {"a": 1.5, "b": math.nan, "c": [math.inf]})
    assert json.loads(path.read_text()) == {"a": 1.5, "b": None, "c": [None]}
    with pytest.raises(TypeError):
        harness.write_record(path, {"x": object()})
    assert json.loads(path.read_text())["a"] == 1.5
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


def test_harness_load_commit_timer_machine():
    """load_average: three values as ``/proc/loadavg`` has them (2 decimals); git_commit: git's
    own short hash; Timer: the seconds a sleep took; machine names the core count."""
    load = harness.load_average()
    proc = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    assert len(load) == 3 and all(abs(a - b) < 0.5 for a, b in zip(load, proc))
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0:
        assert re.fullmatch(re.escape(head.stdout.strip()) + r"(\+dirty)?", harness.git_commit())
    with harness.Timer() as t:
        time.sleep(0.05)
    assert 0.05 <= t.seconds < 1.0
    assert harness.machine().startswith(f"{os.cpu_count()} CPU cores")
