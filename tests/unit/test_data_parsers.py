"""``enerf data images|colmap|video`` read one config (PoseConfig): the same flags, the same
checks; ``colmap`` (the older spelling, --images DIR) keeps its LLFF defaults."""

from __future__ import annotations

import pytest

from enerf.cli.data import COLMAP_DEFAULTS, _capture_args
from enerf.config import PoseConfig
from enerf.errors import ConfigError


def test_colmap_takes_pose_config_flags_and_its_own_defaults(tmp_path):
    out = str(tmp_path / "scene")
    args, pose, _ = _capture_args("colmap", ["--images", "photos", "--out", out, "--overlap", "5"])
    assert args.source == "photos"
    assert pose == PoseConfig(layout="llff", factors=(4, 8), matcher="exhaustive", overlap=5)
    assert COLMAP_DEFAULTS == {"layout": "llff", "factors": (4, 8), "matcher": "exhaustive"}
    _, pose, _ = _capture_args("colmap", ["--images", "p", "--out", out, "--factors", "--layout", "nerfstudio"])
    assert pose.factors == () and pose.layout == "nerfstudio" and pose.matcher == "exhaustive"


def test_images_takes_pose_config_defaults(tmp_path):
    _, pose, _ = _capture_args("images", ["photos", "--out", str(tmp_path / "scene"), "--factors", "3", "6"])
    assert pose == PoseConfig(factors=(3, 6))


def test_a_bad_flag_is_one_config_error(tmp_path):
    with pytest.raises(ConfigError, match="overlap"):
        _capture_args("colmap", ["--images", "p", "--out", str(tmp_path / "s"), "--overlap", "0"])
    with pytest.raises(ConfigError, match="factors"):
        _capture_args("colmap", ["--images", "p", "--out", str(tmp_path / "s"), "--factors", "1"])
