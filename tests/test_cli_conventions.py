"""CLI conventions shared by every command (README "CLI conventions")."""
from __future__ import annotations

import argparse

import pytest

from gpupool.cli.common import add_output_format


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t")
    add_output_format(p, ("text", "json"), "text")
    return p


@pytest.mark.parametrize("argv,expected", [
    ([], "text"), (["-o", "json"], "json"), (["--output", "json"], "json"), (["--output=json"], "json"),
    (["-ojson"], "json"), (["--format", "json"], "json"), (["--format=json"], "json"),
])
def test_output_flag_and_hidden_format_alias(argv, expected):
    assert _parser().parse_args(argv).output == expected


def test_format_alias_is_hidden_from_help():
    text = _parser().format_help()
    assert "-o FORMAT, --output FORMAT" in text
    assert "--format" not in text


def test_output_rejects_unknown_format(capsys):
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["-o", "yaml"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
