"""Device presets: what ``enerf train`` takes for the settings that no config file or flag set.

``--preset`` (default ``auto``) picks one by the device, the scene's layout and what its cameras
show (``--scene_kind``, default ``auto``: decided from the cameras, ``enerf.cameras.scene_kind``):

    cpu    the 10-minute CPU settings: configs/fern_cpu.txt (forward-facing scenes, NDC rays),
           configs/capture_cpu.txt (walk-around captures: world-space rays, a scene contraction) or
           configs/lego_cpu.txt (Blender scenes, which keep their bounded box)
    paper  nerf-pytorch's published settings: configs/fern.txt (forward-facing LLFF scenes),
           configs/lego.txt (Blender); other scenes (captures in transforms.json, walk-around LLFF
           scenes) have none and take the CPU settings
    auto   paper on CUDA, cpu otherwise; none when a config file is given (a config file is a whole recipe:
           its keys over the dataclass defaults, exactly as written)
    none   the dataclass defaults

A preset's values are the keys of the config file it names, read by the parser that reads
``--config`` (the caller's ``read``), less the scene's identity (``IDENTITY_KEYS``: the scene, the
run and the method). A preset only fills keys that were not set: a config file or a flag always wins.
The files are the repository's ``configs/`` folder beside the ``enerf`` package (an editable install,
``pip install -e .``, reads them where they are).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError

__all__ = ["Preset", "PRESETS", "PRESET_CHOICES", "SCENE_KIND_DEFAULT", "IDENTITY_KEYS", "CONFIG_DIR", "config_file",
           "preset_name", "preset_for", "preset_line"]

PRESET_CHOICES = ("auto", "cpu", "paper", "none")
SCENE_KIND_DEFAULT = "auto"  # --scene_kind: decided from the cameras (enerf.config.DataConfig.scene_kind)
CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"  # the repository's configs/, beside enerf/
# Keys of a config file that name the scene, the run or the method: never part of a preset.
IDENTITY_KEYS = frozenset({"expname", "basedir", "scene", "datadir", "dataset_type", "factor", "llffhold",
                           "conditioning", "conditioned_layers"})


@dataclass(frozen=True)
class Preset:
    """One preset for one scene layout: the config file it reads and how the start line describes it."""

    name: str  # cpu | paper
    layout: str  # llff (forward-facing) | capture (walk-around) | blender
    source: str  # the config file its values come from, as the start line names it (configs/fern_cpu.txt)
    summary: str  # what it is, for the start line
    values: dict[str, Any] = field(default_factory=dict)  # field name -> value (preset_for reads them)
    scene: str = ""  # what the cameras show and the flag that overrides it (``preset_for``), for the start line
    has_paper: bool = True  # whether --preset paper has settings for this scene (the start line offers them)


PRESETS: dict[tuple[str, str], Preset] = {
    ("cpu", "llff"): Preset("cpu", "llff", "configs/fern_cpu.txt", "10-minute CPU settings (triplane + 2 x 64 MLP, "
                            "64 samples, --time_budget 600)"),
    ("cpu", "blender"): Preset("cpu", "blender", "configs/lego_cpu.txt", "10-minute CPU settings (triplane + 2 x 64 "
                               "MLP, torch_grid renderer, --time_budget 600)"),
    ("cpu", "capture"): Preset("cpu", "capture", "configs/capture_cpu.txt", "10-minute CPU settings (triplane + "
                               "2 x 64 MLP, scene contraction, proposal sampler, 48 samples, --time_budget 600)"),
    ("paper", "llff"): Preset("paper", "llff", "configs/fern.txt", "the paper's settings (8 x 256 MLP, 64 + 64 "
                              "samples, 200,000 steps)"),
    ("paper", "blender"): Preset("paper", "blender", "configs/lego.txt", "the paper's settings "
                                 "(8 x 256 MLP, 64 + 128 samples, half resolution, 200,000 steps)"),
}


def config_file(source: str) -> Path:
    """The file ``source`` (``configs/fern_cpu.txt``) names, in the repository beside the package;
    a ConfigError (one line) when it is not there (an install without the repository)."""
    path = CONFIG_DIR / Path(source).name
    if not path.is_file():
        raise ConfigError(f"the preset reads {path}, which is missing (enerf's presets are the repository's configs/ "
                          "folder: pip install -e . from a clone); pass --config FILE or --preset none")
    return path


def preset_name(choice: str, cuda: bool, config_file: bool) -> str:
    """The preset ``--preset choice`` means: ``auto`` is ``none`` with a config file, else ``paper``
    on CUDA and ``cpu`` without; the other choices mean themselves."""
    if choice != "auto":
        return choice
    if config_file:
        return "none"
    return "paper" if cuda else "cpu"


def preset_for(name: str, dataset_type: str, kind: str, read: Callable[[Path], dict[str, Any]],
               scene: str = "") -> Preset:
    """The preset ``name`` (cpu | paper) for a scene of ``dataset_type`` (llff | blender | nerfstudio)
    whose cameras show ``kind`` (forward | walkaround): Blender scenes keep their bounded box,
    walk-around scenes take the capture settings, forward-facing ones the LLFF settings; ``paper``
    exists for forward-facing LLFF and Blender scenes only, the others take ``cpu``. Its values are
    ``read(file)`` (field name -> value of each key the file sets) less ``IDENTITY_KEYS``, with
    ``scene_kind = kind`` (not for Blender); ``scene`` is what the start line says about the scene."""
    layout = "blender" if dataset_type == "blender" else "capture" if kind == "walkaround" else "llff"
    if name == "paper" and (dataset_type == "nerfstudio" or (name, layout) not in PRESETS):
        name = "cpu"
    preset = PRESETS[(name, layout)]
    values = {key: value for key, value in read(config_file(preset.source)).items() if key not in IDENTITY_KEYS}
    if dataset_type != "blender":
        values["scene_kind"] = kind
    has_paper = dataset_type != "nerfstudio" and ("paper", layout) in PRESETS
    return replace(preset, values=values, scene=scene, has_paper=has_paper)


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
