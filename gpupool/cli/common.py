"""What several commands share: the output-format flag, the spec argument, usage errors, and 'valid spec
or print diagnostics'."""

from __future__ import annotations

import argparse
import sys

SPEC_HELP = (
    "the stack spec; `-` reads it from stdin (tenantFiles then resolve from the current directory). "
    "Default: --stack's gpupool:spec, else $GPUPOOL_SPEC, else ./spec.yaml"
)


class UsageError(Exception):
    """A usage error (bad argument, missing file, unknown model): `error: MESSAGE` and exit 2 (cli.main)."""


class CommandError(Exception):
    """The command could not do its job (an unreachable server, a refused answer, a failed step):
    `error: MESSAGE` on stderr and exit EXIT (1 by default); with `-o json` also a JSON error object on
    stdout (cli.main). Raise it rather than printing an error and returning 1, so that every command
    reports failures the same way."""

    def __init__(self, message: str, exit: int = 1):
        super().__init__(message)
        self.exit = exit


def add_output_format(
    parser: argparse.ArgumentParser, formats: tuple[str, ...], default: str, help: str | None = None
) -> None:
    """`-o/--output FORMAT`, as kubectl and helm spell it, with `--format` kept as a hidden alias (the
    flag's old name). The value lands in `args.output`."""
    parser.add_argument(
        "-o",
        "--output",
        dest="output",
        choices=formats,
        default=default,
        metavar="FORMAT",
        help=help or f"output format: {', '.join(formats)} (default {default})",
    )
    # Same dest; SUPPRESS keeps it out of --help and stops it from overwriting -o's default.
    parser.add_argument("--format", dest="output", choices=formats, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def add_spec_argument(parser: argparse.ArgumentParser, *, many: bool = False, flag: str | None = None) -> None:
    """SPEC (optional; `-` = stdin) plus `--stack NAME`; resolve it with spec_path(args) / spec_paths(args).
    With FLAG (e.g. "--spec") the spec is a hidden option, kept for old scripts: the caller takes SPEC as
    a positional argument too, as every other command does."""
    if flag:
        parser.add_argument(flag, dest="spec", metavar="SPEC", help=argparse.SUPPRESS)
    else:
        parser.add_argument("spec", nargs="*" if many else "?", metavar="SPEC", help=SPEC_HELP)
    parser.add_argument(
        "--stack",
        metavar="NAME",
        help="read the spec path from gpupool:spec in the Pulumi stack's settings (stacks/Pulumi.NAME.yaml)",
    )


def spec_path(args: argparse.Namespace) -> str:
    """The one spec path the arguments name (UsageError when it names none, or a missing file)."""
    from gpupool.spec.stack import SpecNotFound, resolve

    spec = args.spec
    if isinstance(spec, list):
        if len(spec) > 1:
            raise UsageError("give one SPEC")
        spec = spec[0] if spec else None
    try:
        return resolve(spec, getattr(args, "stack", None))
    except SpecNotFound as exc:
        raise UsageError(str(exc)) from None


def spec_paths(args: argparse.Namespace) -> list[str]:
    """Every spec path (for commands taking SPEC...): the given ones, or the one default."""
    from gpupool.spec.stack import SpecNotFound, resolve

    given = list(args.spec or [])
    if given and getattr(args, "stack", None):
        raise UsageError("give SPEC paths or --stack NAME, not both")
    if given.count("-") > 1:
        raise UsageError("`-` (stdin) can be given once")
    try:
        return [resolve(p, None) for p in given] or [resolve(None, getattr(args, "stack", None))]
    except SpecNotFound as exc:
        raise UsageError(str(exc)) from None


def valid_spec_or_report(path: str, refusal: str):
    """Validate PATH and print every diagnostic (FILE:LINE:COL) to stderr. Returns the model, or None
    after printing `PATH: REFUSAL` when the spec is invalid."""
    from gpupool.rules.engine import validate_file

    result = validate_file(path)
    for d in result.report.sorted():
        print(d.render(), file=sys.stderr)
    if result.spec is None:
        print(f"{result.loaded.path}: {refusal}", file=sys.stderr)
    return result.spec


def valid_spec_or_fail(path: str, refusal: str):
    """Validate PATH and print every diagnostic (FILE:LINE:COL) to stderr. Returns the model; when the spec is
    invalid, CommandError `PATH: REFUSAL` (exit 1, and the JSON error object under `-o json`: a command that
    has no document to print must not leave stdout empty)."""
    from gpupool.rules.engine import validate_file

    result = validate_file(path)
    for d in result.report.sorted():
        print(d.render(), file=sys.stderr)
    if result.spec is None:
        raise CommandError(f"{result.loaded.path}: {refusal}")
    return result.spec
