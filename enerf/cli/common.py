"""What every command shares: the one-line parser, flags generated from config dataclasses, and
the wording of errors with flag names."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import configargparse

from ..config import (DEVICES, CompareConfig, MeshConfig, RunConfig, ShapeMeshConfig, ShapeRunConfig, SynthConfig,
                      VideoConfig)
from ..config.resolve import config_with
from ..config.spec import choices, flag_names, value_type
from ..errors import ConfigError, EnerfError

__all__ = ["DATADIR_HELP", "OneLineParser", "parse_bool", "add_config_flags", "config_from_args", "given_values",
           "add_ckpt_flags", "add_splats_flag", "FIELD_HELP", "parse_export_args", "flag_name", "error_line", "system_error_line"]

# The configs whose fields are flags; flag_name() reads their `flag` metadata.
FLAG_CONFIGS = (RunConfig, ShapeRunConfig, VideoConfig, MeshConfig, CompareConfig, SynthConfig, ShapeMeshConfig)


class OneLineParser(configargparse.ArgumentParser):
    """An argument parser whose errors are a ConfigError (one line, exit 2), not usage + exit."""

    def error(self, message: str):
        raise ConfigError(f"{self.prog}: {message.splitlines()[0] if message else 'invalid arguments'}")


def parse_bool(text: str) -> bool:
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise configargparse.ArgumentTypeError(f"expected true or false, got {text!r}")


_TYPES = {"int": int, "float": float, "bool": parse_bool, "str": str}


def _flag_kwargs(f: dataclasses.Field) -> dict[str, Any]:
    """argparse keywords of the flag of field ``f``: type, nargs, help (default None: the dataclass holds it)."""
    kind, is_tuple = value_type(f)
    flag_type = f.metadata.get("flag_type")
    if flag_type is not None:
        kind = flag_type.__name__
    help_text = (f.metadata.get("help") or "").replace("%", "%%")  # argparse formats help with %
    kwargs: dict[str, Any] = {"type": _TYPES[kind], "default": None, "help": help_text or None}
    if kind == "bool":
        kwargs.update(nargs="?", const=True)
    if is_tuple:
        kwargs["nargs"] = "*" if f.metadata.get("may_be_empty") else "+"
    allowed = choices(f)
    kwargs["metavar"] = "{" + ",".join(allowed) + "}" if allowed else (f.metadata.get("flag") or f.name).upper()
    return kwargs


def _leaf_fields(cls, prefix: str = ""):
    """(dest, field) of every field of ``cls`` that has a flag, sections flattened (``train.n_rand``)."""
    for f in dataclasses.fields(cls):
        if f.metadata.get("section"):
            yield from _leaf_fields(f.default_factory, f"{prefix}{f.name}.")
        elif f.metadata.get("cli", True):
            yield prefix + f.name, f


def add_config_flags(parser, cls, aliases: dict[str, tuple[str, str]] | None = None) -> None:
    """One ``--flag`` per field of dataclass ``cls`` (and of its sections), with the field's help;
    ``aliases`` (other flag -> (field name, what that name is), ``FLAG_ALIASES``) adds further names
    for a field. A ``cls`` with sections
    (``RunConfig``: data, field, render, train) puts each section's flags in an argument group of its
    own (``--help`` lists them under the section's name), its own fields in a group ``run``."""
    sections = {f.name: f.default_factory for f in dataclasses.fields(cls) if f.metadata.get("section")}
    groups: dict[str, Any] = {}

    def group_of(dest: str):
        if not sections:
            return parser
        name = dest.rpartition(".")[0] or "run"
        if name not in groups:
            doc = (sections[name].__doc__ if name in sections else "Where the run writes: <basedir>/<expname>/.")
            groups[name] = parser.add_argument_group(name, " ".join(doc.split()))
        return groups[name]

    dests = {}
    for dest, f in _leaf_fields(cls):
        group_of(dest).add_argument(f"--{f.metadata.get('flag') or f.name}", dest=dest, **_flag_kwargs(f))
        dests[f.name] = (dest, f)
    for alias, (name, what) in (aliases or {}).items():
        dest, f = dests[name]
        kwargs = _flag_kwargs(f)
        kwargs["help"] = f"{what} of --{f.metadata.get('flag') or f.name}, still read"
        group_of(dest).add_argument(f"--{alias}", dest=dest, **kwargs)


def _given(f: dataclasses.Field, args, dest: str) -> Any:
    """The value flag ``dest`` of field ``f`` gave, as the field takes it (``--no_ndc`` -> ``use_ndc``,
    lists -> tuples); None when it was not given."""
    value = getattr(args, dest, None) if f.metadata.get("cli", True) else None
    if value is None:
        return None
    convert = f.metadata.get("from_flag")
    value = tuple(value) if isinstance(value, list) else value
    return convert(value) if convert else value


def given_values(cls, args, prefix: str = "") -> dict[str, Any]:
    """Field name -> value of every field of ``cls`` (and of its sections) whose flag or config-file
    key was given, e.g. the keys a config file sets; ``prefix``: the flags are ``--<prefix><name>``."""
    values = {}
    for dest, f in _leaf_fields(cls, prefix):
        value = _given(f, args, dest)
        if value is not None:
            values[f.name] = value
    return values


def config_from_args(cls, args, prefix: str = "", defaults: dict[str, Any] | None = None):
    """``cls`` with the flags that were given (not None; ``--<prefix><name>``) over ``defaults`` (field name ->
    value, e.g. a recipe's) over the dataclass defaults."""
    return config_with(cls, {**(defaults or {}), **given_values(cls, args, prefix)})


DATADIR_HELP = ("the scene folder, instead of the one recorded at training (needed only where the checkpoint "
                "carries no cameras, or to read the images)")


def add_ckpt_flags(parser, what: str = "a checkpoint (.pt)", datadir: bool = False, required: bool = True) -> None:
    """--ckpt and --device, the flags of every command that reads a checkpoint (and ``datadir``:
    --datadir, NeRF commands); ``required``: False where the command works without a checkpoint."""
    parser.add_argument("--ckpt", required=required, default=None,
                        help=f"path to {what}" + ("" if required else " (optional)"))
    parser.add_argument("--device", choices=DEVICES, default=None,
                        help="auto (CUDA if available), cpu or cuda (default: the run's device setting)")
    if datadir:
        parser.add_argument("--datadir", default=None, help=DATADIR_HELP)


SPLATS_HELP = ("a splat file (.ply, .spz or .splat, e.g. from enerf export splats) to render instead of the field, in the frame "
               "it declares (world when it declares none); the run's cameras and background")


FIELD_HELP = "render the field even where the run has baked splats (<run>/splats.ply, drawn by default)"


def add_splats_flag(parser, help: str = SPLATS_HELP, field: str = "") -> None:
    """--splats F.ply: render from baked splats instead of the field (``enerf render``, ``enerf eval``,
    ``enerf view``); with ``field`` (its help), also --field, which --splats excludes: the field
    where the run's ``splats.ply`` would be drawn (``enerf.runfolder.choose_splats``)."""
    group = parser.add_mutually_exclusive_group() if field else parser
    group.add_argument("--splats", default=None, metavar="F.ply|F.spz|F.splat", help=help)
    if field:
        group.add_argument("--field", action="store_true", help=field)


def parse_export_args(prog: str, description: str, out_help: str, cfg_cls, argv: list[str], splats: bool = False):
    """The arguments of a command that exports from a NeRF checkpoint (``enerf render``, ``enerf mesh``):
    --ckpt, --device, --datadir, --out, --quiet, (``splats``) --splats / --field and the flags of
    ``cfg_cls``. Returns (args, the config)."""
    parser = OneLineParser(prog=prog, description=description)
    add_ckpt_flags(parser, datadir=True)
    if splats:
        add_splats_flag(parser, SPLATS_HELP + " (default: <run>/splats.ply when the run has it)", FIELD_HELP)
    parser.add_argument("--out", default=None, help=out_help)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_flags(parser, cfg_cls)
    args = parser.parse_args(argv)
    return args, config_from_args(cfg_cls, args)


def flag_name(field: str) -> str:
    """The flag of config field ``field``: ``n_rand`` -> ``--N_rand``."""
    flag = next((names[field] for names in map(flag_names, FLAG_CONFIGS) if field in names), field)
    return f"--{flag}"


def error_line(exc: EnerfError) -> str:
    """The message of ``exc`` with the config fields it names written as flags."""
    text = str(exc)
    for field in getattr(exc, "fields", ()):
        text = re.sub(rf"(?<![\w-]){re.escape(field)}\b", flag_name(field), text)
    return text


def system_error_line(exc: BaseException) -> str | None:
    """One line for running out of memory or a failed file operation; None for other errors
    (bugs keep their traceback). ``ENERF_TRACEBACK=1`` shows the traceback in every case."""
    if isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and (
            "out of memory" in str(exc) or "not enough memory" in str(exc))):
        return "out of memory; lower --N_rand, --chunk, --batch_size or the image size (--factor)"
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror}{where}; check the path and free space"
    return None
