"""docs/splats.md's table is the one ``python -m benchmarks.splats --table benchmarks/splats.json`` writes
from the record (the page cannot contradict it)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.splats import TABLE_END, TABLE_START, table

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_table_is_the_records():
    page = (ROOT / "docs" / "splats.md").read_text()
    record = json.loads((ROOT / "benchmarks" / "splats.json").read_text())
    inside = page.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    assert inside == table(record)
    for name, entry in record["entries"].items():  # the Δ column is the difference of the two PSNR columns
        assert abs(entry["delta_psnr"] - (entry["splats"]["psnr"] - entry["field"]["psnr"])) < 1e-9, name
