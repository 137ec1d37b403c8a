"""The `gpupool` command line: a thin dispatcher over gpupool.cli.

Each command module exposes `register(subparsers)` and sets `func` on its parser; the function returns
the exit status. Command modules import their heavy dependencies lazily so that `gpupool validate`
stays fast and never imports Pulumi.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Order is the order shown in --help.
COMMAND_MODULES = (
    "validate",
    "plan",
    "usage",
    "diff",
    "render",
    "mig",
    "tenant",
    "shards",
    "init",
    "stacks",
    "schema",
    "completion",
)


class _Version(argparse.Action):
    """`--version`, as kubectl/helm/pulumi have it; the version is looked up only when asked for."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from gpupool import version

        print(f"gpupool {version()}")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ONLY (a command name), just that command: what `gpupool validate`
    runs then does not import every other command's modules (a tenth of its start-up)."""
    parser = argparse.ArgumentParser(
        prog="gpupool",
        description="Declarative multi-tenant GPU sharing on Kubernetes, checked before rollout.",
    )
    parser.add_argument("--version", action=_Version, help="print gpupool's version and exit")
    _add_global_options(parser, defaults=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in (only,) if only in COMMAND_MODULES else COMMAND_MODULES:
        try:
            module = importlib.import_module(f"gpupool.cli.{name}")
        except ModuleNotFoundError as exc:  # a command still being built; keep the others usable
            if exc.name != f"gpupool.cli.{name}":
                raise
            continue
        module.register(sub)
    for command in _subcommands(parser):
        _add_global_options(command, defaults=False)
    return parser


def _size(text: str) -> int:
    """A byte count: 512Ki, 64Mi, 500M, 2Gi or plain bytes."""
    from gpupool.spec.input_limits import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_global_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The options every command takes, before or after the command name (`gpupool validate --color never`).
    On the commands their default is SUPPRESS, so that one given before the command is kept."""
    from gpupool.spec import input_limits as limits

    def default(value):
        return value if defaults else argparse.SUPPRESS

    env = limits.limits_from_env()  # not limits.LIMITS: a previous main() in this process set that

    group = parser.add_argument_group("global options") if not defaults else parser
    group.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default=default("auto"),
        help="colour the severity of diagnostics: auto (default) = on a terminal, unless NO_COLOR "
        "is set; always; never",
    )
    group.add_argument(
        "--max-file-size",
        type=_size,
        default=default(env.file_bytes),
        metavar="SIZE",
        help=f"read no spec or tenant file larger than this (default {limits.size_text(limits.MAX_FILE_BYTES)}, "
        "or $GPUPOOL_MAX_FILE_SIZE)",
    )
    group.add_argument(
        "--max-input-size",
        type=_size,
        default=default(env.run_bytes),
        metavar="SIZE",
        help=f"read no more than this in all the files of one spec (default {limits.size_text(limits.MAX_RUN_BYTES)}, "
        "or $GPUPOOL_MAX_INPUT_SIZE)",
    )


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = []
    for action in parser._actions:  # argparse has no public way to list subparsers
        if isinstance(action, argparse._SubParsersAction):
            for command in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                out += [command, *_subcommands(command)]
    return out


def main(argv: list[str] | None = None) -> int:
    from gpupool import redact
    from gpupool.cli import console
    from gpupool.cli.common import CommandError, UsageError

    console.setup()  # before argparse prints anything: its messages must not crash on an ASCII stdout either
    redact.install()  # before argparse too: a refused argument is echoed, and it may hold a URL's password
    first = (sys.argv[1:] if argv is None else argv)[:1]
    # The command comes first unless global options precede it; then (and for --help) build them all.
    parser = build_parser(only=first[0] if first and first[0] in COMMAND_MODULES else None)
    args, extra = parser.parse_known_args(argv)
    # argparse fills positionals in one go, so `tenant new NAME --tier T SPEC` leaves SPEC over; a command
    # whose positionals may come after its options names the list to extend (`set_defaults(extend=DEST)`).
    dest = getattr(args, "extend", None)
    if extra and dest and not any(e.startswith("-") and e != "-" for e in extra):
        getattr(args, dest).extend(extra)
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    console.setup(args.color)
    console.colour_stderr()
    from gpupool.spec import input_limits

    input_limits.LIMITS = input_limits.Limits(args.max_file_size, args.max_input_size)
    args.command_path = _command_path(parser, sys.argv[1:] if argv is None else argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        return _failed(args, "UsageError", str(exc), 2)
    except CommandError as exc:
        return _failed(args, "Failed", str(exc), exc.exit)
    except BrokenPipeError:  # `gpupool plan | head` must not print a traceback
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug in gpupool, not in the spec: say so in one line, no traceback
        if os.environ.get("GPUPOOL_DEBUG"):
            raise
        message = (
            f"{type(exc).__name__}: {exc} "
            "(this is a gpupool bug; rerun with GPUPOOL_DEBUG=1 for a traceback and report it)"
        )
        return _failed(args, "InternalError", message, 70, prefix="gpupool: internal error")


def _command_path(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    """The command as typed, subcommands included (`mig check`, `stacks up`): what the JSON error names."""
    words: list[str] = []
    level = parser
    for word in argv:
        choices = next((a.choices for a in level._actions if isinstance(a, argparse._SubParsersAction)), None)
        if not choices:
            break
        if word in choices:
            words.append(word)
            level = choices[word]
    return " ".join(words)


def _failed(args: argparse.Namespace, reason: str, message: str, code: int, prefix: str = "error") -> int:
    """Report a failed command: `PREFIX: MESSAGE` on stderr and, when the command was asked for `-o json`,
    a JSON error object on stdout (scripts parse stdout; an empty one is no answer). Both are scrubbed of
    credentials (gpupool.redact): an exception's text may quote what it was given."""
    from gpupool import redact

    message = redact.scrub(message)
    print(f"{prefix}: {message}", file=sys.stderr)
    if getattr(args, "output", None) == "json":
        command = getattr(args, "command_path", None) or getattr(args, "command", None)
        print(json_error(command, reason, message, code))
    return code


def json_error(command: str | None, reason: str, message: str, code: int) -> str:
    """The JSON error object of a failed command (docs/reference/cli.md, "Errors"): one object, kind Error."""
    import json

    return json.dumps(
        {
            "apiVersion": "gpupool.dev/v1alpha1",
            "kind": "Error",
            "command": command,
            "reason": reason,
            "message": message,
            "exitCode": code,
        },
        indent=2,
    )


if __name__ == "__main__":
    sys.exit(main())
