"""``python -m benchmarks.pages [--check]``: write (or check) the figures of README.md and docs/*.md."""

from __future__ import annotations

import argparse
import sys

from benchmarks.pages import ROOT, differences, staleness_report, write_pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pages",
                                     description="Write the marked figures of README.md and docs/*.md from "
                                                 "benchmarks/*.json.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; list the differences and the stale records, exit 1 if any")
    args = parser.parse_args(argv)
    try:
        diffs = differences()
        problems, notes = staleness_report()
    except KeyError as err:
        print(f"benchmarks.pages: error: {err.args[0]}", file=sys.stderr)
        return 2
    for line in notes:
        print(line)
    if args.check:
        for line in diffs + problems:
            print(line)
        return 1 if diffs or problems else 0
    for page in write_pages():
        print(f"wrote {page.relative_to(ROOT)}")
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
