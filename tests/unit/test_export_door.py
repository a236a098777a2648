"""``enerf export`` is the one door of the exports: six actions, two of them also under their
first names (``enerf mesh``, ``enerf render``: the same function)."""

from __future__ import annotations

import pytest

from enerf.cli import COMMANDS, main
from enerf.cli.export import ACTIONS, EXPORTS, OWN_PARSER


def test_the_door_lists_every_export_once():
    assert EXPORTS == ("mesh", "pointcloud", "depth", "splats", "html", "video")
    assert set(EXPORTS) == set(ACTIONS) | set(OWN_PARSER) and not set(ACTIONS) & set(OWN_PARSER)
    assert OWN_PARSER["mesh"] is COMMANDS["mesh"] and OWN_PARSER["video"] is COMMANDS["render"]


def test_an_unknown_export_is_one_line_naming_the_six(capsys):
    assert main(["export", "glb"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(name in err for name in EXPORTS)


@pytest.mark.parametrize("name, first", [("mesh", "mesh"), ("video", "render")])
def test_both_names_take_the_same_flags(name, first, capsys):
    with pytest.raises(SystemExit):
        main(["export", name, "--help"])
    door = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([first, "--help"])
    alias = capsys.readouterr().out
    assert door.startswith(f"usage: enerf export {name} ") and alias.startswith(f"usage: enerf {first} ")
    assert door.split("options:")[1] == alias.split("options:")[1]
