"""Reading figures out of the records (benchmarks/*.json), and the registry of named figures and tables.

    lookup("demo", "summary.psnr")                  # the value at a dotted key path (list items by index)
    fill("{demo:summary.psnr:.2f} dB")               # a template's ``{RECORD:KEY.PATH:FORMAT}`` filled in
    template_table("results", HEADER, ROWS)          # a table of template rows, registered under its name
    fill("{stale:gpu_capture}")                      # what a page says beside a stale record's figures
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Callable

__all__ = ["FIGURES", "PLACEHOLDER", "ROOT", "STALE_OK", "TABLES", "figure", "fill", "fmt", "lookup", "record",
           "stale_note", "table", "template_records", "template_table", "value", "cites"]

ROOT = Path(__file__).resolve().parents[2]  # the repository root
PLACEHOLDER = re.compile(r"\{(?P<record>\w+):(?P<path>[^:{}]+)(?::(?P<spec>[^{}]*))?\}")

# Named figures and tables: name -> (the record stems they cite, a function of nothing that writes them).
FIGURES: dict[str, tuple[tuple[str, ...], Callable[[], str]]] = {}
TABLES: dict[str, tuple[tuple[str, ...], Callable[[], str]]] = {}

# Records the pages cite although code they depend on changed after they were measured: reruns owed
# (rerun each with its `command` on a quiet machine and write its new `commit`, then take it off this list).
# A page that cites one says so beside its figures with the marker {stale:STEM} (see ``stale_note``).
_NERF = "measured before later commits to the training / rendering code (the redesigns, issue 47's CPU path, the splats)"
# Issues 62-64 changed files every NeRF record depends on without changing what those records measured: a run
# with a config file (or of LLFF / Blender scenes) has splat_seconds 0 and trains, scores and writes what it did;
# held-out views gain an 'uncovered' share; LPIPS is fetched where a network is; SplatConfig gained bake options.
# The demo gives the same held-out PSNR to the last digit before and after (benchmarks/demo_before.json against
# benchmarks/demo.json, one machine). Reruns owed all the same, in one sitting (issue 65).
_SPLAT_ROUND = "measured before training could end in splats (issues 62-64); the demo's digits are unchanged by them"

STALE_OK: dict[str, str] = {
    "gpu_capture": f"needs a GPU (benchmarks/device_checks.sh when one is lent); {_NERF}",
    "gpu_check_h100": f"needs a GPU (python -m benchmarks.gpu_check); {_NERF}",
    "paper_study": _SPLAT_ROUND,
}


@lru_cache(maxsize=None)
def record(stem: str) -> dict:
    """benchmarks/STEM.json, read once."""
    path = ROOT / "benchmarks" / f"{stem}.json"
    if not path.is_file():
        raise KeyError(f"no record benchmarks/{stem}.json")
    return json.loads(path.read_text())


def lookup(stem: str, path: str):
    """The value at the dotted PATH of record STEM (a list's items by their index)."""
    value = record(stem)
    for key in path.split("."):
        try:
            value = value[int(key)] if isinstance(value, list) else value[key]
        except (KeyError, IndexError, ValueError, TypeError):
            raise KeyError(f"benchmarks/{stem}.json has no {path!r} (stopped at {key!r})") from None
    return value


def fmt(value, spec: str | None = None) -> str:
    """VALUE formatted with the format SPEC; a negative number with a true minus sign (−)."""
    text = format(value, spec or "")
    return "\u2212" + text[1:] if isinstance(value, (int, float)) and text.startswith("-") else text


def stale_note(stem: str) -> str:
    """What a page prints beside record STEM's figures: while STEM is in ``STALE_OK``, that they were measured
    on earlier code (which commit: the record's ``commit``; user pages carry no commit hash); nothing once it has
    been rerun."""
    return " (measured on earlier training code; not rerun since)" if stem in STALE_OK else ""


def value(stem: str, path: str, spec: str | None = None) -> str:
    """What a marker ``STEM:PATH [SPEC]`` (inline) or ``{STEM:PATH:SPEC}`` (in a template) writes: the record's
    value at PATH, formatted; ``stale:STEM`` writes ``stale_note(STEM)``."""
    return stale_note(path.strip()) if stem == "stale" else fmt(lookup(stem, path.strip()), spec)


def cites(stem: str, path: str) -> str:
    """The record stem a marker ``STEM:PATH`` cites (``stale:STEM`` cites STEM)."""
    return path.strip() if stem == "stale" else stem


def fill(template: str) -> str:
    """TEMPLATE with every ``{RECORD:KEY.PATH:FORMAT}`` replaced by ``value``."""
    return PLACEHOLDER.sub(lambda m: value(m["record"], m["path"], m["spec"]), template)


def template_records(template: str) -> set[str]:
    """The record stems TEMPLATE's placeholders cite."""
    return {cites(m["record"], m["path"]) for m in PLACEHOLDER.finditer(template)}


def figure(name: str, *records: str):
    """Register the decorated function as inline figure NAME, derived from RECORDS."""
    def register(fn: Callable[[], str]) -> Callable[[], str]:
        FIGURES[name] = (records, fn)
        return fn
    return register


def table(name: str, *records: str):
    """Register the decorated function as table NAME (markdown lines, header included), from RECORDS."""
    def register(fn: Callable[[], str]) -> Callable[[], str]:
        TABLES[name] = (records, fn)
        return fn
    return register


def template_table(name: str, header: str, rows: list[str]) -> None:
    """Register table NAME: a markdown HEADER (its rule line included) and ROWS of templates (see ``fill``)."""
    TABLES[name] = (tuple(sorted(set().union(*map(template_records, rows)))),
                    lambda: "\n".join([header, *map(fill, rows)]))


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table: the HEADER cells, a rule, then each row's cells."""
    lines = ["| " + " | ".join(cells) + " |" for cells in [header, *rows]]
    return "\n".join([lines[0], "|" + "---|" * len(header), *lines[1:]])
