"""One check shared by the CLI tests: a command given bad input says one line and exits 2."""

from __future__ import annotations

from enerf.cli import main


def one_line_error(capsys, argv: list[str], quiet_stdout: bool = False) -> str:
    """Run ``enerf ARGV``: exit code 2, one ``enerf: error:`` line on stderr, no traceback (and nothing on
    stdout with ``quiet_stdout``); returns the line."""
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("enerf: error:") and "Traceback" not in captured.err
    if quiet_stdout:
        assert captured.out == ""
    return err
