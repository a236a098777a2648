"""Shared by the tools that leave a report in a folder: ``<stem>.json`` (the record) and
``<stem>.md`` (the table), both written atomically, and the table printed."""

from __future__ import annotations

import json
from pathlib import Path

from enerf.atomic import atomic_write_text

__all__ = ["write_report_files"]


def write_report_files(folder: Path, stem: str, record: dict, markdown: str, indent: int = 2) -> None:
    """Write ``folder/<stem>.json`` (``record``, JSON with ``indent``) and ``folder/<stem>.md``
    (``markdown``), each through a temp file and a rename, then print ``markdown``."""
    folder = Path(folder)
    atomic_write_text(folder / f"{stem}.json", json.dumps(record, indent=indent) + "\n")
    atomic_write_text(folder / f"{stem}.md", markdown)
    print(markdown)
