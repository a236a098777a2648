"""Command line: parse flags / config files into a config dataclass and call one function.

    enerf train [--config FILE] [--scene demo|fern|...] [--conditioning none|row|col|rowcol|wn|ws]
                [--precond none|bnp] [--weight_decay L --decay_space p|z] [--grad_reg L] ...
    enerf eval --ckpt PATH
    enerf export mesh --ckpt PATH [--resolution R] [--method density|tsdf]      (also: enerf mesh)
    enerf export pointcloud --ckpt PATH --out F.ply [--points N]
    enerf export depth --ckpt PATH --out DIR [--cameras test|train|spiral|...]
    enerf export splats --ckpt PATH --out F.ply      enerf export html --splats F.ply --out F.html
    enerf export video --ckpt PATH [--path spiral|orbit|test|train|interp]     (also: enerf render)
    enerf view --ckpt PATH [--ckpt PATH2] [--host 127.0.0.1 --port 8080]   (the viewer extra)
    enerf compare [--scenes ...] [--modes none row ...] [--seeds 0 1 2] [-- FLAGS OF EVERY RUN]
    enerf data synth --out DIR
    enerf data colmap --images DIR --out SCENE [--factors 4 8] [--matcher exhaustive|sequential]
    enerf data images DIR --out SCENE          enerf data video FILE --out SCENE [--frames 120]
    enerf shape train --mesh torus|bunny|PATH --kind occupancy|sdf [--conditioning row] [--iters N]
    enerf shape mesh --ckpt PATH [--resolution R]      enerf shape eval --ckpt PATH
    enerf --version

One module per command; ``common`` builds the flags from the config dataclasses
(``enerf.config``) and words the library's errors with flag names.
"""

from __future__ import annotations

import os
import sys

from .. import __version__
from ..errors import EnerfError, RunInterrupted
from .common import error_line, system_error_line
from .compare import cmd_compare
from .data import cmd_data
from .eval import cmd_eval
from .export import cmd_export
from .mesh import cmd_mesh
from .render import cmd_render
from .shape import cmd_shape
from .train import build_train_parser, cmd_train, run_config_from_args
from .view import cmd_view

__all__ = ["main", "build_train_parser", "run_config_from_args", "COMMANDS"]

COMMANDS = {"train": cmd_train, "eval": cmd_eval, "data": cmd_data, "render": cmd_render, "mesh": cmd_mesh,
            "compare": cmd_compare, "shape": cmd_shape, "view": cmd_view, "export": cmd_export}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--version":
        print(f"enerf {__version__}")
        return 0
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        known = ", ".join(COMMANDS)
        if argv and argv[0] not in ("-h", "--help"):
            print(f"enerf: error: unknown command {argv[0]!r}; choose one of: {known}", file=sys.stderr)
            return 2
        print(f"usage: enerf {{{known}}} [options]   (enerf COMMAND --help for its options; enerf --version)")
        return 0
    try:
        return COMMANDS[argv[0]](argv[1:])
    except RunInterrupted as exc:  # Ctrl-C / SIGTERM during training: its checkpoint is written
        print(f"enerf: {exc}", file=sys.stderr)
        return exc.exit_code
    except EnerfError as exc:
        print(f"enerf: error: {error_line(exc)}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError, OSError) as exc:  # the machine's limits, not bad input
        line = system_error_line(exc)
        if line is None or os.environ.get("ENERF_TRACEBACK"):
            raise
        print(f"enerf: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("enerf: interrupted", file=sys.stderr)
        return 130
