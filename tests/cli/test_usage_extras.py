"""An unknown option or an extra word given to a subcommand is reported with that subcommand's
usage (argparse hands extras to the top-level parser, whose usage says only ``COMMAND ...``)."""

from __future__ import annotations

import pytest
from acp_fast.cli import main


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (["run", "--bogus", "hi"], "usage: acp-fast run "),
        (["run", "hi", "extra"], "usage: acp-fast run "),
        (["chat", "--bogus"], "usage: acp-fast chat "),
        (["journal", "show", "--bogus", "x.jsonl"], "usage: acp-fast journal show "),
        (["journal", "stats", "x.jsonl", "y.jsonl"], "usage: acp-fast journal stats "),
        (["bench", "--bogus"], "usage: acp-fast bench "),
        (["--bogus"], "usage: acp-fast [-h]"),
    ],
)
def test_extras_show_the_subcommand_s_usage(
    args: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage), err
    extra = next(arg for arg in args if arg in ("--bogus", "extra", "y.jsonl"))
    assert f"error: unrecognized arguments: {extra}\n" in err, err
