"""Self-describing checkpoints: config + weights + optimizer + step + RNG, written atomically.

A checkpoint is a ``torch.save`` dict::

    {"format": "enerf-checkpoint", "format_version": 1, "task": "nerf" | "shape",
     "config": RunConfig.to_dict() or ShapeRunConfig.to_dict(),
     "step": int, "fields": {name: state_dict}, "optimizer": state_dict,
     "rng": {"torch": ..., "numpy": ...}, "extra": {...}}

so ``enerf eval`` (and later render / mesh) need nothing but ``--ckpt``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .atomic import atomic_replace
from .config import RunConfig, ShapeRunConfig, run_config_from_dict, shape_run_config_from_dict
from .errors import CheckpointError, ConfigError
from .rng import rng_state

__all__ = [
    "FORMAT_VERSION",
    "save_checkpoint",
    "load_checkpoint",
    "nonfinite_fields",
    "load_weights",
    "renderer_state",
]

FORMAT = "enerf-checkpoint"
FORMAT_VERSION = 1
# payload["task"] -> the config class's loader ("nerf" when the key is missing)
_CONFIG_LOADERS = {"nerf": run_config_from_dict, "shape": shape_run_config_from_dict}


def nonfinite_fields(fields: dict[str, dict]) -> list[str]:
    """``name.key`` of every floating-point tensor in the state dicts ``fields`` that holds NaN or inf."""
    bad = []
    for name, state in fields.items():
        for key, tensor in (state or {}).items():
            if torch.is_tensor(tensor) and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                bad.append(f"{name}.{key}")
    return bad


def _some(names: list[str]) -> str:
    return names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else "")


def save_checkpoint(
    path: Path,
    config: RunConfig | ShapeRunConfig,
    step: int,
    fields: dict[str, dict],
    optimizer: dict | None = None,
    extra: dict | None = None,
) -> None:
    """Atomically write a checkpoint (temp file + rename); weights with NaN or inf are refused
    (CheckpointError), so a diverged run never replaces its last good checkpoint."""
    bad = nonfinite_fields(fields)
    if bad:
        raise CheckpointError(f"{path}: not written, the weights {_some(bad)} hold NaN or inf (training diverged); "
                              "lower --lrate")
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "task": getattr(config, "TASK", "nerf"),
        "config": config.to_dict(),
        "step": int(step),
        "fields": fields,
        "optimizer": optimizer,
        "rng": rng_state(),
        "extra": extra or {},
    }
    atomic_replace(Path(path), lambda tmp: torch.save(payload, tmp))


def load_checkpoint(
    path: str | Path, map_location: str | torch.device = "cpu"
) -> tuple[dict, RunConfig | ShapeRunConfig]:
    """Read a checkpoint; returns (payload, config). Raises CheckpointError on any problem."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found (pass the .pt file written under <run>/checkpoints/)")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as exc:  # torch raises many types for corrupt files
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {exc})".splitlines()[0]) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an enerf checkpoint (no '{FORMAT}' header)")
    version = payload.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {version} is not supported (this enerf reads version {FORMAT_VERSION})"
        )
    try:
        task = payload.get("task", "nerf")  # checkpoints without a task are NeRF runs
        if task not in _CONFIG_LOADERS:
            raise CheckpointError(f"{path}: checkpoint task {task!r} is not one of {', '.join(_CONFIG_LOADERS)}")
        config = _CONFIG_LOADERS[task](payload["config"])
    except (ConfigError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{path}: checkpoint config is incompatible with this enerf ({exc})") from None
    if "fields" not in payload and "models" in payload:  # written before the key was named for what it holds
        payload["fields"] = payload.pop("models")
    fields = payload.get("fields")
    if not isinstance(fields, dict) or not all(isinstance(m, dict) for m in fields.values()):
        raise CheckpointError(f"{path}: checkpoint holds no weights (its 'fields' entry is missing or malformed)")
    bad = nonfinite_fields(fields)
    if bad:
        raise CheckpointError(f"{path}: the weights {_some(bad)} hold NaN or inf (a diverged run); use an earlier "
                              "checkpoint or retrain with a lower --lrate")
    return payload, config


def load_weights(modules: dict[str, torch.nn.Module], fields: dict, ckpt_path: str | Path) -> None:
    """Load ``fields[name]`` (a checkpoint's ``fields``) into each module: the one weight loader
    (``enerf.loaded_run.load_run``, a resumed run's ``train.state.restore_loop_state``);
    CheckpointError (one line) when one is missing or does not fit the network the checkpoint's
    config describes."""
    for name, module in modules.items():
        if name not in fields:
            raise CheckpointError(f"{ckpt_path}: no weights for the '{name}' network")
        try:
            module.load_state_dict(fields[name])
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CheckpointError(f"{ckpt_path}: weights of '{name}' do not fit its config ({first})") from None


def renderer_state(extra: dict) -> dict | None:
    """The renderer's state (its estimator's: the occupancy grid) in a checkpoint's ``extra``;
    older checkpoints call it ``estimator``."""
    return extra.get("renderer", extra.get("estimator"))
