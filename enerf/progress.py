"""Progress bars of the long non-training work: evaluations, renders, mesh grids.

One rule for all of them: a tqdm bar on stderr, shown only when asked for (``enabled``; the
commands' ``--quiet`` turns it off) and when stderr is a terminal, so logs and captured output
of ``enerf compare``'s runs stay free of carriage-return lines.
"""

from __future__ import annotations

import sys

from tqdm import tqdm

__all__ = ["progress_bar", "stderr_is_terminal"]


def stderr_is_terminal() -> bool:
    """Whether stderr is a terminal (the condition for showing a bar)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def progress_bar(total: int, desc: str, enabled: bool = True, unit: str = "it", leave: bool = True,
                 bar_format: str | None = None) -> tqdm:
    """A tqdm bar on stderr counting to ``total`` ``unit``s (SI-scaled: 190k rays), disabled
    unless ``enabled`` and stderr is a terminal; ``leave=False`` clears it when closed;
    ``bar_format``: tqdm's (e.g. a count of seconds shown as whole seconds)."""
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, file=sys.stderr, dynamic_ncols=True,
                leave=leave, disable=not (enabled and stderr_is_terminal()), bar_format=bar_format)
