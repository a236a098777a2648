"""Device presets: what ``enerf train`` takes for the settings that no config file or flag set.

``--preset`` (default ``auto``) picks one by the device, the scene's layout and what its cameras
show (``--scene_kind``, default ``auto``: decided from the cameras, ``enerf.cameras.scene_kind``):

    cpu    the 10-minute CPU settings: fern_cpu (forward-facing scenes, NDC rays), capture_cpu
           (walk-around captures: world-space rays, a scene contraction) or lego_cpu (Blender
           scenes, which keep their bounded box)
    cuda   the same three for one CUDA GPU: fern_cuda, capture_cuda, lego_cuda (larger photos,
           4,096 rays a step, the occupancy grid through nerfacc for Blender, 5 minutes)
    paper  nerf-pytorch's published settings: fern (forward-facing LLFF scenes), lego (Blender);
           other scenes (captures in transforms.json, walk-around LLFF scenes) have none and take
           the device's preset
    auto   cuda on CUDA, cpu otherwise (Apple's MPS included); none when a config file is given (a
           config file is a whole recipe: its keys over the dataclass defaults, exactly as written)
    none   the dataclass defaults

Each preset is a recipe of ``enerf.config.recipes`` (overlays on the dataclass defaults, in one
module: an installed wheel has the same presets as a clone); the repository's ``configs/<name>.txt``
are the same recipes written as example files for ``--config``, with the scene and the run named
(``IDENTITY_KEYS``). A preset never sets the scene's identity, the run or the method; the cpu and
paper presets leave the image factor to the loader, the cuda ones set it. A preset only fills keys
that were not set: a config file or a flag always wins (``enerf.config.resolve``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from . import recipes
from .recipes import IDENTITY_KEYS

__all__ = ["Preset", "PRESETS", "PRESET_CHOICES", "IDENTITY_KEYS", "preset_name", "preset_for",
           "preset_line"]

PRESET_CHOICES = ("auto", "cpu", "cuda", "paper", "none")
# A photo capture's run (transforms.json, walk-around or forward-facing) ends in splats: on a CPU the field
# trains CAPTURE_FIELD_SECONDS, then its splats are baked for CAPTURE_SPLAT_SECONDS (about 15 minutes of wall
# time in all); the split measured on four captures against 600 s + 255 s: benchmarks/capture_split.json.
# The cuda preset keeps its own field time and bakes CAPTURE_SPLAT_SECONDS after it (at most as long as the
# field trained).
CAPTURE_FIELD_SECONDS = 420.0
CAPTURE_SPLAT_SECONDS = 420.0


@dataclass(frozen=True)
class Preset:
    """One preset for one scene layout: its recipe and how the start line describes it."""

    name: str  # cpu | cuda | paper
    layout: str  # llff (forward-facing) | capture (walk-around) | blender
    recipe: str  # its recipe in enerf.config.recipes (fern_cpu); configs/<recipe>.txt is its example file
    summary: str  # what it is, for the start line: a template of its values ({field}: the field in words)
    values: dict[str, Any] = field(default_factory=dict)  # field name -> value (preset_for fills them)
    scene: str = ""  # what the cameras show and the flag that overrides it (``preset_for``), for the start line
    has_paper: bool = True  # whether --preset paper has settings for this scene (the start line offers them)

    @property
    def example(self) -> str:
        """The repository's example file of the same recipe (``configs/fern_cpu.txt``)."""
        return f"configs/{self.recipe}.txt"

    @property
    def source(self) -> str:
        """Where its values come from, as the start line names it."""
        return f"enerf's preset {self.recipe} (example file: {self.example})"

    def describe(self) -> str:
        """``summary`` with its values (``preset_for``'s, else its recipe's): ``10-minute CPU settings
        (triplane + 2 x 64 MLP, 64 samples, ...)``."""
        v = self.values or recipes.values(self.recipe)
        words = {"field": f"{v.get('encoding', 'frequency')} + {v['netdepth']} x {v['netwidth']} MLP",
                 "minutes": f"{v.get('time_budget', 0) / 60:g}", "rays": f"{v['n_rand']:,}"}
        return self.summary.format(**words, **v)


_CPU = "{minutes}-minute CPU settings ({field}, "
_CUDA = "GPU settings ({field}, "
_PAPER = "the paper's settings ({netdepth} x {netwidth} MLP, {n_samples} + {n_importance} samples, "
PRESETS: dict[tuple[str, str], Preset] = {
    ("cpu", "llff"): Preset("cpu", "llff", "fern_cpu", _CPU + "{n_samples} samples, --time_budget {time_budget})"),
    ("cpu", "blender"): Preset("cpu", "blender", "lego_cpu", _CPU + "{sampler} sampler, --time_budget {time_budget})"),
    ("cpu", "capture"): Preset("cpu", "capture", "capture_cpu", _CPU + "scene contraction, {sampler} sampler, "
                               "{n_samples} samples, --time_budget {time_budget})"),
    ("cuda", "llff"): Preset("cuda", "llff", "fern_cuda", _CUDA + "photos at factor {factor}, {rays} rays a step, "
                             "{n_samples} samples, --time_budget {time_budget})"),
    ("cuda", "blender"): Preset("cuda", "blender", "lego_cuda", _CUDA + "full-size images, occupancy grid through "
                                "nerfacc where it builds, {rays} rays in the first step, {target_sample_batch_size:,} "
                                "samples a step, --time_budget {time_budget})"),
    ("cuda", "capture"): Preset("cuda", "capture", "capture_cuda", _CUDA + "photos at factor {factor}, scene "
                                "contraction, {sampler} sampler, {rays} rays a step, {n_samples} samples, "
                                "--time_budget {time_budget})"),
    ("paper", "llff"): Preset("paper", "llff", "fern", _PAPER + "{iters:,} steps)"),
    ("paper", "blender"): Preset("paper", "blender", "lego", _PAPER + "half resolution, {iters:,} steps)"),
}


def preset_name(choice: str, device: str, config_file: bool) -> str:
    """The preset ``--preset choice`` means on ``device`` (cpu | cuda | mps): ``auto`` is ``none``
    with a config file, else ``cuda`` on CUDA and ``cpu`` elsewhere; the other choices mean themselves."""
    if choice != "auto":
        return choice
    if config_file:
        return "none"
    return "cuda" if device == "cuda" else "cpu"


def preset_for(name: str, dataset_type: str, kind: str, scene: str = "", fallback: str = "cpu") -> Preset:
    """The preset ``name`` (cpu | cuda | paper) for a scene of ``dataset_type`` (llff | blender |
    nerfstudio) whose cameras show ``kind`` (forward | walkaround): Blender scenes keep their bounded
    box, walk-around scenes take the capture settings, forward-facing ones the LLFF settings;
    ``paper`` exists for forward-facing LLFF and Blender scenes only, the others take ``fallback``
    (the device's preset). Its values are its recipe's (``enerf.config.recipes.values``), with
    ``scene_kind = kind`` (not for Blender) and, for a photo capture (transforms.json),
    ``splat_seconds = CAPTURE_SPLAT_SECONDS`` unless the recipe sets it and, on the cpu preset,
    ``time_budget = CAPTURE_FIELD_SECONDS``; ``scene`` is what the start line says about the scene."""
    layout = "blender" if dataset_type == "blender" else "capture" if kind == "walkaround" else "llff"
    if name == "paper" and (dataset_type == "nerfstudio" or (name, layout) not in PRESETS):
        name = fallback
    preset = PRESETS[(name, layout)]
    values = recipes.values(preset.recipe)
    if dataset_type != "blender":
        values["scene_kind"] = kind
    if dataset_type == "nerfstudio":  # a photo capture's run ends in splats
        values.setdefault("splat_seconds", CAPTURE_SPLAT_SECONDS)
        if preset.name == "cpu":  # the CPU's minutes split between the field and its splats
            values["time_budget"] = CAPTURE_FIELD_SECONDS
    has_paper = dataset_type != "nerfstudio" and ("paper", layout) in PRESETS
    return replace(preset, values=values, scene=scene, has_paper=has_paper)


def preset_line(preset: Preset, choice: str, device: str, why: str = "") -> str:
    """The one line ``enerf train`` starts with: the device and why, the scene, the preset and
    where its values come from, and the flag for the other preset; e.g. ``cpu (--device auto:
    torch sees no CUDA GPU): forward-facing (...), --scene_kind walkaround if not; 10-minute CPU
    settings (...) from enerf's preset fern_cpu (example file: configs/fern_cpu.txt) for what no flag
    sets; --preset paper for the paper's 8 x 256 network``."""
    where = f"{device} ({why})" if why else device
    if choice == "auto":
        where = f"{where}: "
    elif choice != preset.name:  # --preset paper for a scene it has no settings for
        where = f"--preset {choice} (none for this scene: {preset.name}) on {where}: "
    else:
        where = f"--preset {preset.name} on {where}: "
    paper = "--preset paper for the paper's 8 x 256 network"
    if preset.name == "paper":
        other = f"--preset {'cuda for the GPU' if device == 'cuda' else 'cpu for the 10-minute CPU'} settings"
    elif preset.name == "cuda":
        other = "--preset cpu for the 10-minute CPU settings" + (f", {paper}" if preset.has_paper else "")
    elif preset.has_paper:
        other = paper
    else:
        other = "--preset none for the built-in defaults"
    scene = f"{preset.scene}; " if preset.scene else ""
    return f"{where}{scene}{preset.describe()} from {preset.source} for what no flag sets; {other}"
