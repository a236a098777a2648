"""Device presets: what ``enerf train`` takes for the settings that no config file or flag set.

``--preset`` (default ``auto``) picks one by the device, the scene's layout and what its cameras
show (``--scene_kind``, default ``auto``: decided from the cameras, ``enerf.cameras.scene_kind``):

    cpu    the 10-minute CPU settings: configs/fern_cpu.txt (forward-facing scenes, NDC rays),
           configs/capture_cpu.txt (walk-around captures: world-space rays, a scene contraction) or
           configs/lego_cpu.txt (Blender scenes, which keep their bounded box)
    paper  nerf-pytorch's published settings: configs/fern.txt (forward-facing LLFF scenes),
           nerf-pytorch's configs/lego.txt (Blender; 8 x 256, 64 + 128 samples, half-resolution images);
           other scenes (captures in transforms.json, walk-around LLFF scenes) have none and take the
           CPU settings
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

__all__ = ["Preset", "PRESETS", "PRESET_CHOICES", "SCENE_KIND_DEFAULT", "preset_name", "preset_for", "preset_line"]

PRESET_CHOICES = ("auto", "cpu", "paper", "none")
SCENE_KIND_DEFAULT = "auto"  # --scene_kind: decided from the cameras (enerf.config.DataConfig.scene_kind)

# The 10-minute CPU settings of LLFF scenes (configs/fern_cpu.txt without the scene's identity).
_CPU_LLFF = {
    "encoding": "triplane", "grid_resolutions": (64, 256), "grid_components": 16,
    "grid_aabb": (-1.5, -1.67, -1.0, 1.5, 1.67, 1.0),
    "netdepth": 2, "netwidth": 64, "view_width": 64, "multires_views": 4,
    "n_samples": 64, "n_importance": 0, "rgb_weight_threshold": 1e-4, "raw_noise_std": 1.0,
    "n_rand": 1024, "lrate": 4e-3, "encoding_lrate": 4e-2, "lrate_decay": 10.0, "lrate_cooldown": 0.3,
    "iters": 100000, "time_budget": 600.0, "eval_every": 500, "eval_views": 1, "log_every": 100, "kappa_every": 500, "video": "auto",
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
    "iters": 100000, "time_budget": 600.0, "eval_every": 500, "eval_views": 5, "log_every": 100, "kappa_every": 500, "video": "auto",
}
# The 10-minute CPU settings of walk-around captures (configs/capture_cpu.txt without the scene's identity).
_CPU_CAPTURE = {
    "contraction": "linf", "far": 1000.0, "lindisp_from": 1.0, "renderer": "proposal",
    "proposal_samples": (128,), "proposal_resolutions": (64,), "proposal_components": 8, "distortion_weight": 0.002,
    "encoding": "triplane", "grid_resolutions": (64, 256), "grid_components": 16,
    "netdepth": 2, "netwidth": 64, "view_width": 64, "multires_views": 4,
    "n_samples": 48, "n_importance": 0, "rgb_weight_threshold": 1e-4, "raw_noise_std": 1.0,
    "n_rand": 1024, "lrate": 4e-3, "encoding_lrate": 4e-2, "lrate_decay": 10.0, "lrate_cooldown": 0.3,
    "iters": 100000, "time_budget": 600.0, "eval_every": 500, "eval_views": 1, "log_every": 100, "kappa_every": 500, "video": "auto",
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
    layout: str  # llff (forward-facing) | capture (walk-around) | blender
    source: str  # the config file that holds the same values
    summary: str  # what it is, for the start line
    values: dict[str, Any] = field(default_factory=dict)  # field name -> value
    scene: str = ""  # what the cameras show and the flag that overrides it (``preset_for``), for the start line
    has_paper: bool = True  # whether --preset paper has settings for this scene (the start line offers them)


PRESETS: dict[tuple[str, str], Preset] = {
    ("cpu", "llff"): Preset("cpu", "llff", "configs/fern_cpu.txt", "10-minute CPU settings (triplane + 2 x 64 MLP, "
                            "64 samples, --time_budget 600)", _CPU_LLFF),
    ("cpu", "blender"): Preset("cpu", "blender", "configs/lego_cpu.txt", "10-minute CPU settings (triplane + 2 x 64 "
                               "MLP, torch_grid renderer, --time_budget 600)", _CPU_BLENDER),
    ("cpu", "capture"): Preset("cpu", "capture", "configs/capture_cpu.txt", "10-minute CPU settings (triplane + "
                               "2 x 64 MLP, scene contraction, proposal sampler, 48 samples, --time_budget 600)", _CPU_CAPTURE),
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


def preset_for(name: str, dataset_type: str, kind: str, scene: str = "") -> Preset:
    """The preset ``name`` (cpu | paper) for a scene of ``dataset_type`` (llff | blender | nerfstudio)
    whose cameras show ``kind`` (forward | walkaround): Blender scenes keep their bounded box,
    walk-around scenes take the capture settings, forward-facing ones the LLFF settings; ``paper``
    exists for forward-facing LLFF and Blender scenes only, the others take ``cpu``. Its values
    carry ``scene_kind = kind``; ``scene`` is what the start line says about the scene."""
    layout = "blender" if dataset_type == "blender" else "capture" if kind == "walkaround" else "llff"
    if name == "paper" and (dataset_type == "nerfstudio" or (name, layout) not in PRESETS):
        name = "cpu"
    preset = PRESETS[(name, layout)]
    values = preset.values if dataset_type == "blender" else {**preset.values, "scene_kind": kind}
    has_paper = dataset_type != "nerfstudio" and ("paper", layout) in PRESETS
    return Preset(preset.name, preset.layout, preset.source, preset.summary, values, scene, has_paper)


def preset_line(preset: Preset, choice: str, cuda: bool) -> str:
    """The one line ``enerf train`` starts with, e.g. ``cpu: forward-facing (...), --scene_kind
    walkaround if not; 10-minute CPU settings (...) from configs/fern_cpu.txt for what no flag sets;
    --preset paper for the paper's 8 x 256 network``."""
    where = f"{'cuda' if cuda else 'cpu'}: " if choice == "auto" else f"--preset {preset.name}: "
    if preset.name == "paper":
        other = "--preset cpu for the 10-minute CPU settings"
    elif preset.has_paper:
        other = "--preset paper for the paper's 8 x 256 network"
    else:
        other = "--preset none for the built-in defaults"
    scene = f"{preset.scene}; " if preset.scene else ""
    return f"{where}{scene}{preset.summary} from {preset.source} for what no flag sets; {other}"
