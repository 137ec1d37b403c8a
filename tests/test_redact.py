"""gpupool.redact, the second line of defence: whatever reaches stdout or stderr of a command is scrubbed of the
credentials the process read, of URL passwords and of Authorization header values; and a failed command run
with `-o json` prints one JSON error object on stdout.

Each expected string is built here from the canary, not read from gpupool."""

from __future__ import annotations

import json
import secrets

import pytest

from gpupool import redact
from gpupool.cli import main as cli_main


@pytest.fixture(autouse=True)
def _clean():
    redact.forget_all()
    yield
    redact.forget_all()


def canary() -> str:
    return "CANARY-" + secrets.token_hex(8)


def test_a_registered_secret_is_masked_with_and_without_its_whitespace():
    c = canary()
    redact.register(c + "\n")  # a YAML block scalar's value ends in a newline
    text = f"token {c} and again {c}."
    assert c not in redact.scrub(text)
    assert redact.scrub(text).count(redact.MASK) == 2
    assert redact.scrub("nothing secret here") == "nothing secret here"


def test_bytes_and_multi_line_secrets_are_masked_line_by_line():
    first, second = canary(), canary()
    redact.register(f"{first}\n{second}\n".encode())
    assert first not in redact.scrub(f"...{first}...") and second not in redact.scrub(f"{second}")


def test_a_short_value_is_not_scrubbed_so_reports_keep_their_words():
    redact.register("abc")
    assert redact.scrub("abc def") == "abc def"
    assert redact.registered() == frozenset()


def test_a_secret_containing_another_is_masked_whole():
    short = canary()
    long = short + "-MORE"
    redact.register(short)
    redact.register(long)
    assert redact.scrub(long) == redact.MASK


@pytest.mark.parametrize(
    "url",
    [
        "http://user:{c}@prometheus.example:9090/api",
        "https://:{c}@host",
        "s3://key:{c}@bucket?region=x",
    ],
)
def test_a_url_password_is_masked_without_being_registered(url):
    c = canary()
    out = redact.scrub(f"cannot query {url.format(c=c)}: refused")
    assert c not in out and redact.MASK in out


@pytest.mark.parametrize("header", ["Authorization: Bearer {c}", "authorization=Basic {c}", "AUTHORIZATION: {c}"])
def test_an_authorization_value_is_masked(header):
    c = canary()
    assert c not in redact.scrub(header.format(c=c))


def test_url_for_display_drops_userinfo_and_query_and_keeps_the_rest():
    c = canary()
    assert redact.url_for_display(f"https://me:{c}@prom.example:9443/sub/path?access_token={c}") == (
        "https://prom.example:9443/sub/path"
    )
    assert redact.url_for_display("http://[::1]:9090") == "http://[::1]:9090"


def test_an_internal_error_quoting_a_secret_is_scrubbed_and_json_gets_an_error_object(monkeypatch, capsys):
    """The last guard: even a gpupool bug whose exception quotes a credential it read prints none of it."""
    c = canary()

    def boom(args):
        redact.register(c)
        raise RuntimeError(f"token {c} rejected")

    monkeypatch.setattr(cli_main, "build_parser", _parser_running(boom))
    code = cli_main.main(["plan", "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 70
    assert c not in out and c not in err
    error = json.loads(out)
    assert (error["kind"], error["reason"], error["exitCode"], error["command"]) == (
        "Error",
        "InternalError",
        70,
        "plan",
    )
    assert "RuntimeError" in error["message"] and "internal error" in err


@pytest.mark.parametrize(
    ("raised", "code", "reason"),
    [("usage", 2, "UsageError"), ("command", 1, "Failed"), ("command3", 3, "Failed")],
)
def test_usage_and_command_errors_print_one_json_object_with_their_exit_code(monkeypatch, capsys, raised, code, reason):
    from gpupool.cli.common import CommandError, UsageError

    def fail(args):
        if raised == "usage":
            raise UsageError("give SPEC")
        raise CommandError("the server refused", exit=3 if raised == "command3" else 1)

    monkeypatch.setattr(cli_main, "build_parser", _parser_running(fail))
    assert cli_main.main(["plan", "-o", "json"]) == code
    out, err = capsys.readouterr()
    error = json.loads(out)
    assert (error["reason"], error["exitCode"]) == (reason, code)
    assert err.startswith("error: ") and error["message"] in err
    # Without -o json, stdout stays empty: the error is on stderr only.
    assert cli_main.main(["plan"]) == code
    assert capsys.readouterr().out == ""


def _parser_running(func):
    """A parser with one command, `plan`, whose function is FUNC (so that the test needs no spec)."""
    import argparse

    def build(only=None):
        parser = argparse.ArgumentParser(prog="gpupool")
        cli_main._add_global_options(parser, defaults=True)
        sub = parser.add_subparsers(dest="command")
        p = sub.add_parser("plan")
        p.add_argument("-o", "--output", default="table")
        p.set_defaults(func=func)
        return parser

    return build
