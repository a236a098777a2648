"""One place that decides a run's configuration: ``resolve(flags, device, scene)``.

Order, the later winning: the dataclass defaults, the device preset chosen for the scene
(``enerf.config.presets``, its values from ``enerf.config.recipes``), then what a config file or a
flag set (``flags``). ``enerf train`` and the benchmarks call it; what the scene's folder holds is
read by the caller (``enerf.data.scene_probe.describe_scene``), so nothing here touches the disk.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import ConfigError
from .nerf import RunConfig
from .presets import Preset, preset_for, preset_name

__all__ = ["SceneShape", "resolve", "config_with"]


@dataclass(frozen=True)
class SceneShape:
    """What a preset is chosen by: the scene's layout and what its cameras show."""

    dataset_type: str  # llff | blender | nerfstudio (``auto`` already decided)
    kind: str  # forward | walkaround (``enerf.cameras.scene_kind``)
    said: str = ""  # what the start line says of it ("forward-facing (...), --scene_kind walkaround if not")


def config_with(cls, values: Mapping[str, Any]):
    """``cls`` (a config dataclass, e.g. ``RunConfig``) with ``values`` (field name -> value, each
    field of any section named once) over its defaults; a ConfigError for a name no field has."""
    own, sections = {}, {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("section"):
            sections[f.name] = f.default_factory
        elif f.name in values:
            own[f.name] = values[f.name]
    names = {f.name for c in sections.values() for f in dataclasses.fields(c)}
    names |= {f.name for f in dataclasses.fields(cls) if f.name not in sections}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(f"{cls.__name__} has no option {', '.join(unknown)}")
    built = {name: section(**{f.name: values[f.name] for f in dataclasses.fields(section) if f.name in values})
             for name, section in sections.items()}
    try:
        return cls(**own, **built)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None


def resolve(flags: Mapping[str, Any], device: str, scene: SceneShape | None, preset: str = "auto",
            config_file: bool = False) -> tuple[RunConfig, Preset | None]:
    """(the run's config, the preset it took (None: none)).

    Args:
        flags: field name -> value of what a config file or a flag set (``expname``, ``n_rand``, ...).
        device: what the run computes on (cpu | cuda | mps; ``enerf.device.choose_device``).
        scene: the scene's layout and kind (needed unless the preset resolves to none).
        preset: ``--preset`` (auto | cpu | cuda | paper | none); ``auto`` is none with ``config_file``.

    Raises:
        ConfigError: a value its option refuses (one line), or a preset without ``scene``.
    """
    name = preset_name(preset, device, config_file)
    chosen = None
    if name != "none":
        if scene is None:
            raise ConfigError(f"--preset {name} needs the scene's layout to choose its settings")
        chosen = preset_for(name, scene.dataset_type, scene.kind, scene.said, preset_name("auto", device, False))
    return config_with(RunConfig, {**(chosen.values if chosen else {}), **flags}), chosen
