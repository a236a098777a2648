"""The user pages (README.md, docs/*.md) hold the figures their records give: every marked figure and table is
what ``python -m benchmarks.pages`` writes, and no page cites a record measured on code that changed since,
unless ``STALE_OK`` says why (benchmarks/README.md, "Figures on the pages")."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks import pages
from benchmarks.pages.records import fill, fmt, lookup, record
from benchmarks.splats import table as splats_table


def test_every_page_is_what_the_command_writes():
    diffs = pages.differences()
    assert not diffs, "run python -m benchmarks.pages:\n" + "\n".join(diffs)


def test_no_page_cites_a_stale_record():
    if pages.git("rev-parse", "--git-dir") is None:
        pytest.skip("no git checkout: a record's age cannot be told")
    problems, notes = pages.staleness_report()
    print("\n".join(notes))  # the reruns owed (pytest -s shows them)
    assert not problems, "\n".join(problems)


def test_every_cited_record_names_its_commit_and_what_it_depends_on():
    cited = pages.all_cited()
    assert {"demo", "splats"} <= set(cited)  # the README's first row and docs/splats.md's table
    for stem in cited:
        assert pages.measured_commits(stem) and record(stem)["depends"], stem


def test_markers_are_well_formed():
    """Every opening marker has its end, so nothing on a page escapes the command."""
    for page in pages.pages():
        text = page.read_text()
        for kind in ("fig", "table"):
            opened = len(re.findall(rf"<!-- {kind} \S", text))
            assert opened == len(re.findall(rf"<!-- /{kind} -->", text)), (page.name, kind)
            assert opened == len((pages.FIG if kind == "fig" else pages.TABLE).findall(text)), (page.name, kind)


def test_a_figure_is_the_records_value_as_written_by_hand():
    """The README's demo row against the record read independently with json."""
    demo = json.loads((pages.ROOT / "benchmarks" / "demo.json").read_text())
    assert fill("{demo:summary.psnr:.2f}") == f"{demo['summary']['psnr']:.2f}"
    assert lookup("demo", "history.0") == demo["history"][0]
    assert fmt(-0.46, "+.2f") == "\u22120.46" and fmt(1.02, "+.2f") == "+1.02" and fmt(3801, ",") == "3,801"
    readme = (pages.ROOT / "README.md").read_text()
    assert f"held-out PSNR {demo['summary']['psnr']:.2f} dB" in readme


def test_the_splats_page_table_is_the_splats_records():
    """docs/splats.md's table is ``benchmarks.splats.table`` of the record; its Δ column is the difference."""
    page = (pages.ROOT / "docs" / "splats.md").read_text()
    rec = json.loads((pages.ROOT / "benchmarks" / "splats.json").read_text())
    assert f"<!-- table splats -->\n{splats_table(rec)}\n<!-- /table -->" in page
    for name, entry in rec["entries"].items():
        assert abs(entry["delta_psnr"] - (entry["splats"]["psnr"] - entry["field"]["psnr"])) < 1e-9, name


def test_check_finds_a_changed_figure_and_a_missing_key(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("PSNR <!-- fig demo:summary.psnr .2f -->99.99<!-- /fig --> dB\n")
    monkeypatch.setattr(pages, "pages", lambda: [page])
    monkeypatch.setattr(pages, "ROOT", tmp_path)
    assert len(pages.differences()) == 1
    assert pages.write_pages() == [page]
    assert page.read_text() == f"PSNR <!-- fig demo:summary.psnr .2f -->{record('demo')['summary']['psnr']:.2f}<!-- /fig --> dB\n"
    assert pages.differences() == []
    page.write_text("<!-- fig demo:summary.nothing -->1<!-- /fig -->")
    with pytest.raises(KeyError, match="nothing"):
        pages.differences()


def test_stale_is_a_commit_after_the_measurement_that_touched_what_it_depends_on(tmp_path, monkeypatch):
    """In a throw-away git repository: a record is fresh until a commit changes a path it depends on
    (a commit elsewhere does not count); a ``+dirty`` record counts from the commit that stored it."""
    import subprocess

    from benchmarks.pages import records

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    if pages.git("--version") is None:
        pytest.skip("no git")
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "a.py").write_text("a = 1\n")
    (tmp_path / "other.py").write_text("b = 1\n")
    git("add", ".")
    git("commit", "-qm", "code")
    measured = git("rev-parse", "--short", "HEAD")
    (tmp_path / "code" / "a.py").write_text("a = 2\n")  # measured with this change uncommitted: +dirty
    (tmp_path / "benchmarks" / "r.json").write_text(json.dumps({"commit": measured + "+dirty", "depends": ["code"]}))
    (tmp_path / "benchmarks" / "s.json").write_text(json.dumps({"commit": measured, "depends": ["code"]}))
    git("add", ".")
    git("commit", "-qm", "the change and its record")
    monkeypatch.setattr(pages, "ROOT", tmp_path)
    monkeypatch.setattr(records, "ROOT", tmp_path)
    records.record.cache_clear()
    try:
        assert pages.stale("r") == []  # the dirty change was committed with the record
        assert [c.split()[1] for c in pages.stale("s")] == ["the"]  # a clean record made before that change
        (tmp_path / "other.py").write_text("b = 2\n")
        git("commit", "-qam", "elsewhere")
        assert pages.stale("r") == []
        (tmp_path / "code" / "a.py").write_text("a = 3\n")
        git("commit", "-qam", "touches code")
        assert [c.split(" ", 1)[1] for c in pages.stale("r")] == ["touches code"]
        (tmp_path / "benchmarks" / "u.json").write_text(json.dumps({"commit": "0123456", "depends": ["code"]}))
        assert pages.stale("u") is None  # a commit this checkout does not hold: cannot tell
    finally:
        records.record.cache_clear()


def test_a_stale_record_is_said_stale_where_a_page_cites_it(tmp_path, monkeypatch):
    """``{stale:STEM}`` and ``<!-- fig stale:STEM -->`` say the figures are from earlier code while STEM is in STALE_OK and
    nothing once it leaves; a page citing a STALE_OK record without them beside each figure (its paragraph; a
    table's paragraph before it, past a code block) is a problem."""
    from benchmarks.pages import records

    owed = {"demo": "a rerun owed"}
    monkeypatch.setattr(records, "STALE_OK", owed)
    monkeypatch.setattr(pages, "STALE_OK", owed)
    note = "(measured on earlier training code; not rerun since)"
    assert fill("{demo:summary.psnr:.2f} dB{stale:demo}") == f"{record('demo')['summary']['psnr']:.2f} dB {note}"
    assert pages.render_figure("stale:demo", None) == " " + note
    page = tmp_path / "page.md"
    page.write_text("PSNR <!-- fig demo:summary.psnr .2f -->x<!-- /fig --> dB\n")
    monkeypatch.setattr(pages, "pages", lambda: [page])
    monkeypatch.setattr(pages, "ROOT", tmp_path)
    monkeypatch.setattr(pages, "stale", lambda stem: ["abc1234 a change"])
    problems, _ = pages.staleness_report()
    assert any("without saying so" in p for p in problems)
    page.write_text("PSNR <!-- fig demo:summary.psnr .2f -->x<!-- /fig --> dB <!-- fig stale:demo --><!-- /fig -->\n")
    pages.write_pages()
    assert note in page.read_text()
    assert pages.staleness_report()[0] == []
    fig = "<!-- fig demo:summary.psnr .2f -->x<!-- /fig -->"
    said = f"<!-- fig stale:demo --> {note}<!-- /fig -->"
    assert pages.unmarked_citations(f"A {fig} {said}.\n\nB {fig} again.\n\nC {fig}.\n", "demo") == 2
    assert pages.unmarked_citations(f"A {fig}.\n\nB {said}, and {fig}.\n", "demo") == 1
    table = "<!-- table demo_walltime -->\n| x |\n<!-- /table -->\n"
    monkeypatch.setitem(records.TABLES, "demo_walltime", (("demo",), lambda: "| x |"))
    assert pages.unmarked_citations(f"Runs {said}:\n\n```bash\nrun\n```\n\n{table}", "demo") == 0
    assert pages.unmarked_citations(f"Runs {said}.\n\nMore.\n\n```bash\nrun\n```\n\n{table}", "demo") == 1
    owed.clear()
    assert fill("{stale:demo}") == "" and pages.render_figure("stale:demo", None) == ""
