"""Device presets: what ``enerf train`` takes for the settings that no config file or flag set.

``--preset`` (default ``auto``) picks one by the device and the scene's layout:

    cpu    the 10-minute CPU settings: configs/fern_cpu.txt (LLFF) or configs/lego_cpu.txt (Blender)
    paper  nerf-pytorch's published settings: configs/fern.txt (LLFF), nerf-pytorch's configs/lego.txt
           (Blender; 8 x 256, 64 + 128 samples, half-resolution images)
    auto   paper on CUDA, cpu otherwise; none when a config file is given (a config file is a whole recipe:
           its keys over the dataclass defaults, exactly as written)
    none   the dataclass defaults

A preset only fills keys that were not set: a config file or a flag always wins. Its values are
field names and field values (``n_samples``, ``use_ndc``), not flags; the scene's identity
(``scene``, ``datadir``, ``expname``, ``conditioning``) is never part of one. This module is the
one home of the presets; tests/test_presets.py checks that the config files named here say the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Preset", "PRESETS", "PRESET_CHOICES", "preset_name", "preset_line"]

PRESET_CHOICES = ("auto", "cpu", "paper", "none")

# The 10-minute CPU settings of LLFF scenes (configs/fern_cpu.txt without the scene's identity).
_CPU_LLFF = {
    "encoding": "triplane", "grid_resolutions": (64, 256), "grid_components": 16,
    "grid_aabb": (-1.5, -1.67, -1.0, 1.5, 1.67, 1.0),
    "netdepth": 2, "netwidth": 64, "view_width": 64, "multires_views": 4,
    "n_samples": 64, "n_importance": 0, "rgb_weight_threshold": 1e-4, "raw_noise_std": 1.0,
    "n_rand": 1024, "lrate": 4e-3, "encoding_lrate": 4e-2, "lrate_decay": 10.0, "lrate_cooldown": 0.3,
    "iters": 100000, "time_budget": 600.0, "eval_every": 500, "eval_views": 1, "log_every": 100, "kappa_every": 500,
}
# The 10-minute CPU settings of Blender scenes (configs/lego_cpu.txt without the scene's identity).
_CPU_BLENDER = {
    "testskip": 8, "white_bkgd": True,
    "encoding": "triplane", "grid_resolutions": (64, 256), "grid_components": 16,
    "grid_aabb": (-1.5, -1.5, -1.5, 1.5, 1.5, 1.5),
    "netdepth": 2, "netwidth": 64, "view_width": 64, "multires_views": 4,
    "renderer": "torch_grid", "render_step_size": 0.01, "grid_resolution": 128, "early_stop_eps": 1e-3,
    "target_sample_batch_size": 65536, "raw_noise_std": 0.0,
    "n_rand": 1024, "lrate": 2e-3, "encoding_lrate": 2e-2, "lrate_decay": 10.0,
    "iters": 100000, "time_budget": 600.0, "eval_every": 500, "eval_views": 5, "log_every": 100, "kappa_every": 500,
}
# nerf-pytorch's LLFF settings (configs/fern.txt without the scene's identity).
_PAPER_LLFF = {
    "n_rand": 1024, "n_samples": 64, "n_importance": 64, "use_viewdirs": True, "raw_noise_std": 1.0,
    "netdepth": 8, "netwidth": 256, "multires": 10, "multires_views": 4,
    "lrate": 5e-4, "lrate_decay": 250.0, "iters": 200000, "eval_every": 10000, "ckpt_every": 10000,
}
# nerf-pytorch's Blender settings (its configs/lego.txt: white background, half resolution,
# 64 + 128 samples, 500 steps on the central crop, decay over 500k steps).
_PAPER_BLENDER = {
    "half_res": True, "white_bkgd": True,
    "n_rand": 1024, "n_samples": 64, "n_importance": 128, "use_viewdirs": True, "raw_noise_std": 0.0,
    "netdepth": 8, "netwidth": 256, "multires": 10, "multires_views": 4,
    "lrate": 5e-4, "lrate_decay": 500.0, "precrop_iters": 500, "precrop_frac": 0.5,
    "iters": 200000, "eval_every": 10000, "ckpt_every": 10000,
}


@dataclass(frozen=True)
class Preset:
    """One preset for one scene layout: its values and how the start line describes it."""

    name: str  # cpu | paper
    layout: str  # llff | blender
    source: str  # the config file that holds the same values
    summary: str  # what it is, for the start line
    values: dict[str, Any] = field(default_factory=dict)  # field name -> value


PRESETS: dict[tuple[str, str], Preset] = {
    ("cpu", "llff"): Preset("cpu", "llff", "configs/fern_cpu.txt", "10-minute CPU settings (triplane + 2 x 64 MLP, "
                            "64 samples, --time_budget 600)", _CPU_LLFF),
    ("cpu", "blender"): Preset("cpu", "blender", "configs/lego_cpu.txt", "10-minute CPU settings (triplane + 2 x 64 "
                               "MLP, torch_grid renderer, --time_budget 600)", _CPU_BLENDER),
    ("paper", "llff"): Preset("paper", "llff", "configs/fern.txt", "the paper's settings (8 x 256 MLP, 64 + 64 "
                              "samples, 200,000 steps)", _PAPER_LLFF),
    ("paper", "blender"): Preset("paper", "blender", "nerf-pytorch's configs/lego.txt", "the paper's settings "
                                 "(8 x 256 MLP, 64 + 128 samples, half resolution, 200,000 steps)", _PAPER_BLENDER),
}


def preset_name(choice: str, cuda: bool, config_file: bool) -> str:
    """The preset ``--preset choice`` means: ``auto`` is ``none`` with a config file, else ``paper``
    on CUDA and ``cpu`` without; the other choices mean themselves."""
    if choice != "auto":
        return choice
    if config_file:
        return "none"
    return "paper" if cuda else "cpu"


def preset_line(preset: Preset, choice: str, cuda: bool) -> str:
    """The one line ``enerf train`` starts with, e.g. ``cpu: 10-minute CPU settings (...) from
    configs/fern_cpu.txt; --preset paper for the paper's 8 x 256 network``."""
    where = f"{'cuda' if cuda else 'cpu'}: " if choice == "auto" else f"--preset {preset.name}: "
    other = ("--preset paper for the paper's 8 x 256 network" if preset.name == "cpu"
             else "--preset cpu for the 10-minute CPU settings")
    return f"{where}{preset.summary} from {preset.source} for what no flag sets; {other}"
