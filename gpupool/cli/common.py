"""What several commands share: the output-format flag, and 'valid spec or print diagnostics'."""
from __future__ import annotations

import argparse
import sys


def add_output_format(parser: argparse.ArgumentParser, formats: tuple[str, ...], default: str,
                      help: str | None = None) -> None:
    """`-o/--output FORMAT`, as kubectl and helm spell it, with `--format` kept as a hidden alias (the
    flag's old name). The value lands in `args.output`."""
    parser.add_argument("-o", "--output", dest="output", choices=formats, default=default, metavar="FORMAT",
                        help=help or f"output format: {', '.join(formats)} (default {default})")
    # Same dest; SUPPRESS keeps it out of --help and stops it from overwriting -o's default.
    parser.add_argument("--format", dest="output", choices=formats, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)


def valid_spec_or_report(path: str, refusal: str):
    """Validate PATH and print every diagnostic (FILE:LINE:COL) to stderr. Returns the model, or None
    after printing `PATH: REFUSAL` when the spec is invalid."""
    from gpupool.rules.engine import validate_file

    result = validate_file(path)
    for d in result.report.sorted():
        print(d.render(), file=sys.stderr)
    if result.spec is None:
        print(f"{path}: {refusal}", file=sys.stderr)
    return result.spec
