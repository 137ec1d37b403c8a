"""What validate accepts, render can write: depth and name-length limits are checked at validation, parser
messages are readable, and every refusal has the exit status the README's table gives (issue 21)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpupool.cli.main import main
from gpupool.spec.loader import MAX_DEPTH

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def spec(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "stacks/dev", tmp_path / "dev")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "dev/spec.yaml"


def _values(spec: Path, depth: int) -> None:
    text = spec.read_text()
    nested = "{a: " * depth + "1" + "}" * depth
    assert "namespace: gpu-operator\n" in text
    spec.write_text(text.replace("namespace: gpu-operator\n", f"namespace: gpu-operator\n    values: {nested}\n", 1))


@pytest.mark.parametrize("depth", [400, MAX_DEPTH])
def test_values_nested_too_deep_are_refused_by_validate_and_render_does_not_crash(spec, depth, tmp_path, capsys):
    _values(spec, depth)
    assert main(["validate", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "[GP023]" in err and f"more than {MAX_DEPTH} levels" in err
    assert main(["render", str(spec), "--output-dir", str(tmp_path / "out")]) == 1


def test_values_nested_within_the_limit_render(spec, tmp_path):
    _values(spec, MAX_DEPTH - 5)  # values sit 3 levels down: cluster.gpuOperator.values
    assert main(["validate", str(spec)]) == 0
    assert main(["render", str(spec), "--output-dir", str(tmp_path / "out")]) == 0


def test_an_overlong_stack_name_is_a_usage_error(spec, capsys):
    assert main(["validate", "--stack", "a" * 300]) == 2
    assert "at most 100 characters" in capsys.readouterr().err


def test_an_overlong_spec_path_is_a_usage_error(spec, capsys):
    assert main(["validate", "a" * 300 + ".yaml"]) == 2
    assert "cannot be used (File name too long)" in capsys.readouterr().err


def test_an_output_name_too_long_for_the_file_system_is_exit_1(spec, tmp_path, capsys):
    assert main(["render", str(spec), "--output-dir", str(tmp_path / ("d" * 300))]) == 1
    assert "too long" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text,message",
    [
        ("a: [1, 2\nb: 3\n", "did not find expected ',' or ']'"),
        ("a: {x: 1\n", "did not find expected ',' or '}'"),
    ],
)
def test_parser_messages_keep_the_parsers_own_tokens(tmp_path, text, message, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert message in err and "it or it" not in err


def test_parser_messages_never_quote_the_file(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text("a: !secret-token-42! b\n")
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert "[GP001]" in err and "secret-token-42" not in err
