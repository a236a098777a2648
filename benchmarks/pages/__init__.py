"""Figures on the user pages (README.md, docs/*.md), written from their JSON records (benchmarks/*.json).

A page never types a figure that a record holds: it marks where the figure goes and this package writes it.

    <!-- fig demo:summary.psnr .2f -->25.54<!-- /fig --> dB     an inline figure: RECORD:KEY.PATH [FORMAT]
    <!-- fig fox_minutes -->13.6<!-- /fig -->                   an inline figure from a named function
    <!-- table results -->                                      a table from a named function
    | ... |
    <!-- /table -->

RECORD is a file stem of benchmarks/ (``demo``: benchmarks/demo.json), KEY.PATH a dotted path into it (list
items by their index), FORMAT a Python format spec (``.2f``, ``,``, ``+.2f``; negative numbers get a true
minus sign). Named figures and tables live in ``benchmarks/pages/tables.py``. Whatever sits between a marker
and its end is replaced.

    python -m benchmarks.pages            # rewrite every page whose marked figures differ from the records
    python -m benchmarks.pages --check    # write nothing: list the differences and stale records, exit 1 if any

A cited record is *stale* when a commit after the one it measured (its ``commit``) changed a path it
``depends`` on (benchmarks/README.md, "Figures on the pages"). ``STALE_OK`` names the stale records the pages
still cite, and why: reruns owed; a page that cites one says so beside every figure of it, with the marker
``{stale:STEM}`` (in a template row) or ``<!-- fig stale:STEM --><!-- /fig -->`` (in the paragraph of an inline
figure, or the one before a table), which say the figures are from earlier code until the record is rerun and
leaves ``STALE_OK``. tests/unit/test_pages.py fails on any other stale record.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from benchmarks.pages import capture_tables, splat_tables, tables  # noqa: F401  (register the named tables and figures)
from benchmarks.pages.records import FIGURES, ROOT, STALE_OK, TABLES, cites, record, stale_note, value
from enerf.atomic import atomic_write_text

__all__ = ["FIG", "STALE_OK", "TABLE", "cited_records", "differences", "pages", "render_page", "stale",
           "staleness_report", "write_pages"]

FIG = re.compile(r"<!-- fig (?P<name>\S+?)(?: (?P<spec>\S+))? -->(?P<body>.*?)<!-- /fig -->", re.S)
TABLE = re.compile(r"<!-- table (?P<name>\S+) -->\n(?P<body>.*?)<!-- /table -->", re.S)


def pages() -> list[Path]:
    """The user pages: README.md and docs/*.md."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def render_figure(name: str, spec: str | None) -> str:
    """Inline figure NAME (``RECORD:KEY.PATH``, ``stale:STEM`` or a named figure) as the page shows it."""
    if ":" in name:
        return value(*name.split(":", 1), spec)
    if name not in FIGURES:
        raise KeyError(f"no figure named {name!r} in benchmarks/pages/tables.py")
    return FIGURES[name][1]()


def render_table(name: str) -> str:
    if name not in TABLES:
        raise KeyError(f"no table named {name!r} in benchmarks/pages/tables.py")
    return TABLES[name][1]()


def render_page(text: str) -> str:
    """TEXT with every marked figure and table rewritten from the records."""
    text = TABLE.sub(lambda m: f"<!-- table {m['name']} -->\n{render_table(m['name'])}\n<!-- /table -->", text)
    return FIG.sub(lambda m: m[0][:m.start("body") - m.start()] + render_figure(m["name"], m["spec"])
                   + "<!-- /fig -->", text)


def _marker_cites(kind: str, name: str) -> set[str]:
    """The record stems one marker (``fig`` or ``table`` NAME) cites."""
    if kind == "table":
        return set(TABLES.get(name, ((), None))[0])
    return {cites(*name.split(":", 1))} if ":" in name else set(FIGURES.get(name, ((), None))[0])


def cited_records(text: str) -> set[str]:
    """The record stems TEXT's markers cite."""
    out: set[str] = set()
    for kind, pattern in (("fig", FIG), ("table", TABLE)):
        for m in pattern.finditer(text):
            out |= _marker_cites(kind, m["name"])
    return out


def _paragraph(text: str, start: int, end: int) -> str:
    """The paragraph of TEXT (between blank lines) around TEXT[start:end]."""
    first = text.rfind("\n\n", 0, start)
    last = text.find("\n\n", end)
    return text[first + 2 if first >= 0 else 0:last if last >= 0 else len(text)]


def unmarked_citations(text: str, stem: str) -> int:
    """How many of TEXT's markers cite STEM without its stale note beside them: in the paragraph of an
    inline figure; in a table, the paragraph just before it or, past a code block, the one before that (TEXT: a
    page as ``render_page`` writes it)."""
    note, missing = stale_note(stem).strip(), 0
    for kind, pattern in (("fig", FIG), ("table", TABLE)):
        for m in pattern.finditer(text):
            if m["name"] == f"stale:{stem}" or stem not in _marker_cites(kind, m["name"]):
                continue
            if kind == "fig":
                beside = _paragraph(text, m.start(), m.end())
            else:  # the table, the paragraph before it and, when that is a code block, the one before that
                blocks = [b for b in text[:m.start()].split("\n\n") if b.strip()]
                count = 2 if blocks and blocks[-1].lstrip().startswith("```") else 1
                beside = "\n\n".join(blocks[-count:]) + m["body"]
            missing += note not in beside
    return missing


def differences() -> list[str]:
    """One line per marker whose text differs from what the records give: page, marker, page's, record's."""
    lines = []
    for page in pages():
        text = page.read_text()
        for kind, pattern, write in (("fig", FIG, lambda m: render_figure(m["name"], m["spec"])),
                                     ("table", TABLE, lambda m: render_table(m["name"]) + "\n")):
            for m in pattern.finditer(text):
                new = write(m)
                if new != m["body"]:
                    lines.append(f"{page.relative_to(ROOT)}: {kind} {m['name']}: the page has "
                                 f"{m['body'].strip()[:70]!r}, the record gives {new.strip()[:70]!r}")
    return lines


def write_pages() -> list[Path]:
    """Rewrite (atomically) every page whose marked figures differ from the records; the pages rewritten."""
    written = []
    for page in pages():
        text = page.read_text()
        new = render_page(text)
        if new != text:
            atomic_write_text(page, new)
            written.append(page)
    return written


def git(*args: str) -> str | None:
    """``git ARGS`` run in the repository's root: its output, or None without git or when it fails."""
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def measured_commits(stem: str) -> list[str]:
    """The commits record STEM says it measured: its ``commit``, else each of its ``entries``' ``commit``."""
    rec = record(stem)
    if "commit" in rec:
        return [rec["commit"]]
    return [e["commit"] for e in rec.get("entries", {}).values() if isinstance(e, dict) and "commit" in e]


def stale(stem: str) -> list[str] | None:
    """The commits after record STEM's measurement that changed a path it ``depends`` on ([]: fresh);
    None when git cannot tell (no git, or a commit this checkout does not hold).

    A ``+dirty`` commit measured uncommitted code: the measurement then counts from the first later commit
    that changed the record (the one that committed that code beside it)."""
    rec, commits = record(stem), measured_commits(stem)
    if not commits or not rec.get("depends"):
        raise KeyError(f"benchmarks/{stem}.json is cited on a page, so it needs 'commit' and 'depends'")
    if git("rev-parse", "--git-dir") is None:
        return None
    found: list[str] = []
    for commit in commits:
        base = commit.split("+", 1)[0]
        if git("cat-file", "-e", f"{base}^{{commit}}") is None:
            return None
        if "+" in commit:
            stored = git("log", "--reverse", "--format=%h", f"{base}..HEAD", "--", f"benchmarks/{stem}.json")
            base = stored.split()[0] if stored else base
        log = git("log", "--format=%h %s", f"{base}..HEAD", "--", *rec["depends"]) or ""
        found += [line for line in log.splitlines() if line not in found]
    return found


def all_cited() -> dict[str, list[str]]:
    """Every cited record stem -> the pages that cite it."""
    out: dict[str, list[str]] = {}
    for page in pages():
        for stem in sorted(cited_records(page.read_text())):
            out.setdefault(stem, []).append(str(page.relative_to(ROOT)))
    return out


def staleness_report() -> tuple[list[str], list[str]]:
    """(problems, notes). Problems: a cited record stale and not in STALE_OK; a STALE_OK entry not stale or
    not cited, or cited by a page that does not say it is stale (``stale_note``). Notes: STALE_OK's entries with
    their reasons, records whose staleness git cannot tell."""
    problems, notes, cited = [], [], all_cited()
    for stem in sorted(cited):
        commits = stale(stem)
        if commits is None:
            notes.append(f"{stem}: staleness unknown (no git, or its commit is not in this checkout)")
        elif commits and stem not in STALE_OK:
            problems.append(f"{stem} (cited by {', '.join(cited[stem])}) is stale: {len(commits)} commit(s) since it "
                            f"was measured changed what it depends on, the last {commits[0][:70]!r}")
        elif not commits and stem in STALE_OK:
            problems.append(f"{stem} is in STALE_OK but is not stale: take it out of STALE_OK")
        if stem in STALE_OK:
            for page in cited[stem]:
                missing = unmarked_citations(render_page((ROOT / page).read_text()), stem)
                if missing:
                    problems.append(f"{page} cites {stem}, which is stale, {missing} time(s) without saying so there: "
                                    f"put {{stale:{stem}}} in its template row or <!-- fig stale:{stem} --><!-- /fig "
                                    "--> in the paragraph of its figures or the one before its table")
    for stem, why in STALE_OK.items():
        if stem not in cited:
            problems.append(f"{stem} is in STALE_OK but no page cites it: take it out of STALE_OK")
        notes.append(f"stale, rerun owed: {stem}: {why}")
    return problems, notes
