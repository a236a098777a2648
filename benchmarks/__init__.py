"""The benchmarks behind the figures on the user pages, each beside its JSON record in this folder.

Run from the repository root: ``python -m benchmarks.NAME --help``. Shared set-up (machine, load
average, timing, the record written atomically, the git commit) lives in ``benchmarks.harness``;
benchmarks/README.md lists the records and the history of how the figures were reached.
"""
