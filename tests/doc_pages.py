"""The pages the documentation tests read: the README and docs/ (the user pages), benchmarks/README.md, and the
prose of a page without its code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository root
README = ROOT / "README.md"
USER_PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
PAGES = [*USER_PAGES, ROOT / "benchmarks" / "README.md"]

FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code spans (links there are not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))
