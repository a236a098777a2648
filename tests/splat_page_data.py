"""The splats an exported page embeds, read back from its file (enerf's ``decode_page_splats``, which the
page's decode.js mirrors), for the tests of the page with and without a browser."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from enerf.splats.pagepack import decode_page_splats

__all__ = ["read_page"]


def read_page(path: Path) -> tuple[str, dict, dict]:
    """(the page's text, its JSON header, ``decode_page_splats``' arrays in drawing order)."""
    text = Path(path).read_text(encoding="utf-8")
    header = json.loads(re.search(r'<script type="application/json" id="enerf-header">(.*?)</script>', text).group(1))
    data = base64.b64decode(re.search(r'id="enerf-data">([A-Za-z0-9+/=]*)</script>', text).group(1))
    return text, header, decode_page_splats(data, header)
