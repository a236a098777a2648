"""How a config field describes itself, and the one function that checks a config.

Every field of the dataclasses in ``enerf.config`` is made with :func:`option`, which stores in
the field's metadata its help text, its command-line flag (when it differs from the field name),
its allowed choices and its numeric range. :func:`check_config` reads that metadata: each
dataclass calls it from ``__post_init__``, so a config object that exists is a valid one.

Errors are plain :class:`~enerf.errors.ConfigError` messages that name the field
(``n_rand must be an integer in [1, 1048576], got 0``) and carry the field names in
``error.fields``; the CLI rewrites those names as its flags (``--N_rand``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Literal, get_args, get_origin, get_type_hints

from ..errors import ConfigError

__all__ = ["Range", "option", "section", "config_class", "choices", "check_config", "check_value", "check_run_name",
           "check_box", "check_skips", "value_type", "flag_names",
           "show", "MAX_SEED", "MAX_RAYS", "MAX_GRID"]

MAX_SEED = 2**32 - 1  # numpy's seed range
MAX_RAYS = 2**20  # rays per training step; more cannot be allocated on the machines enerf targets
MAX_GRID = 2048  # points per axis of a marching-cubes grid (2048^3 densities are 32 GiB)


@dataclass(frozen=True)
class Range:
    """Allowed numbers: [lo, hi], with ``lo_open`` / ``hi_open`` for open ends; always finite."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False

    def admits(self, value: Any, integer: bool) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if (integer and not isinstance(value, int)) or not math.isfinite(value):
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        below = value < self.hi if self.hi_open else value <= self.hi
        return above and below

    def describe(self, integer: bool) -> str:
        kind = "an integer" if integer else "a finite number"
        if self.lo == -math.inf and self.hi == math.inf:
            return kind
        if self.hi == math.inf:
            return f"{kind} {'>' if self.lo_open else '>='} {_bound(self.lo)}"
        left, right = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
        return f"{kind} in {left}{_bound(self.lo)}, {_bound(self.hi)}{right}"


def option(default: Any, help: str, *, flag: str | None = None,
           lo: float = -math.inf, hi: float = math.inf, lo_open: bool = False, hi_open: bool = False,
           cli: bool = True, flag_type: type | None = None, from_flag: Callable[[Any], Any] | None = None,
           may_be_empty: bool = False):
    """A dataclass field with its help, flag and allowed values in its metadata.

    flag: the command-line name when it is not the field's (``N_rand`` for ``n_rand``; other names it is
    read under: ``enerf.config.nerf.FLAG_ALIASES``); the allowed strings of a choice are its ``Literal`` annotation's; lo / hi (lo_open / hi_open): the range of a number or of each number
    of a tuple; cli: False keeps the field off the command line; flag_type / from_flag: a flag
    that takes another type than the field (``--no_ndc``: a bool, ``use_ndc = not no_ndc``);
    may_be_empty: a tuple whose flag may be given alone, for the empty tuple (``--factors``: none).
    """
    meta = {"help": help, "flag": flag, "range": Range(lo, hi, lo_open, hi_open),
            "cli": cli, "flag_type": flag_type, "from_flag": from_flag, "may_be_empty": may_be_empty}
    return dataclasses.field(default=default, metadata=meta)


def section(cls: type) -> Any:
    """A nested config (``RunConfig.train``) made from its defaults."""
    return dataclasses.field(default_factory=cls, metadata={"section": True})


def config_class(cls: type) -> type:
    """A frozen dataclass whose fields carry their resolved annotations (``Field.type`` is the type
    itself, not its string), so flags, choices and checks read the types, never their spelling."""
    cls = dataclass(frozen=True)(cls)
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        f.type = hints[f.name]
    return cls


def choices(f: dataclasses.Field) -> tuple[str, ...]:
    """The allowed strings of a ``Literal[...]`` field; () for any other field."""
    return get_args(f.type) if get_origin(f.type) is Literal else ()


def value_type(f: dataclasses.Field) -> tuple[str, bool]:
    """(``"int"`` / ``"float"`` / ``"bool"`` / ``"str"``, is a tuple) from the field's resolved annotation."""
    if get_origin(f.type) is tuple:  # tuple[int, ...]
        return get_args(f.type)[0].__name__, True
    if get_origin(f.type) is Literal:
        return "str", False
    return f.type.__name__, False


def check_value(f: dataclasses.Field, value: Any) -> None:
    """Raise ConfigError (naming the field) unless ``value`` is allowed for field ``f``."""
    allowed_strings = choices(f)
    if allowed_strings and value not in allowed_strings:
        raise ConfigError(f"{f.name} {value!r} is not one of {', '.join(allowed_strings)}", fields=(f.name,))
    kind, each = value_type(f)
    if kind not in ("int", "float"):
        return
    allowed: Range = f.metadata.get("range", Range())
    for item in value if each and isinstance(value, (tuple, list)) else (value,):
        if not allowed.admits(item, integer=kind == "int"):
            what = "values must each be" if each else "must be"
            raise ConfigError(f"{f.name} {what} {allowed.describe(kind == 'int')}, got {show(value)}", fields=(f.name,))


def check_config(cfg: Any) -> None:
    """Check every field of dataclass ``cfg`` against its metadata (nested sections check themselves)."""
    for f in dataclasses.fields(cfg):
        if not f.metadata.get("section"):
            check_value(f, getattr(cfg, f.name))


def check_run_name(expname: str, basedir: str) -> None:
    """The run folder ``basedir/expname`` must be a real folder name."""
    if not str(expname).strip() or str(expname).strip() in (".", ".."):
        raise ConfigError(f"expname must name a folder under basedir, got {expname!r}", fields=("expname", "basedir"))
    if not str(basedir).strip():
        raise ConfigError("basedir must name a folder, got ''", fields=("basedir",))
    if "\0" in str(expname) + str(basedir):
        raise ConfigError("expname and basedir must not contain NUL characters", fields=("expname", "basedir"))


def check_box(name: str, box: tuple[float, ...]) -> None:
    """``box`` is 6 numbers xmin ymin zmin xmax ymax zmax with each min < max."""
    if len(box) != 6 or any(a >= b for a, b in zip(box[:3], box[3:])):
        raise ConfigError(f"{name} takes 6 numbers xmin ymin zmin xmax ymax zmax with each min < max, got {show(box)}",
                          fields=(name,))


def check_skips(skips: tuple[int, ...], netdepth: int) -> None:
    """A skip re-reads the input after trunk layer s, so s = ``netdepth - 1`` (the last layer) has
    no layer to feed; skips >= ``netdepth`` are inert (nerf-pytorch's default (4,) on a shallow net)."""
    if any(s == netdepth - 1 for s in skips):
        raise ConfigError(f"skips must be in 0..{netdepth - 2} (or >= {netdepth}, ignored) for netdepth "
                          f"{netdepth}, got {show(skips)}", fields=("skips", "netdepth"))


def flag_names(cls: type) -> dict[str, str]:
    """Field name -> flag (no dashes) of every field of ``cls`` (and of its sections) whose flag differs from
    its name: ``{"n_rand": "N_rand", ...}``."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("section"):
            out.update(flag_names(f.default_factory))
        elif f.metadata.get("flag") and f.metadata.get("flag_type") is None:
            out[f.name] = f.metadata["flag"]
    return out


def show(value: Any) -> str:
    """A value as an error message prints it: ``0.5``, ``'row'``, ``1 2 3``."""
    if isinstance(value, (tuple, list)):
        return " ".join(show(v) for v in value) or "(none)"
    return f"{value:g}" if isinstance(value, float) else repr(value)


def _bound(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
