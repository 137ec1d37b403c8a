"""`gpupool validate SPEC...`: every problem in every spec, located and with its rule id, in one run."""

from __future__ import annotations

import sys

from gpupool.cli.common import add_output_format, add_spec_argument, spec_paths
from gpupool.present.diagnostics import FORMATS
from gpupool.present.text import plural


def register(sub) -> None:
    p = sub.add_parser(
        "validate",
        help="check specs without touching a cluster",
        description="Check one or more stack specs (and the tenant files they include). "
        "Prints FILE:LINE:COL: error: PATH: MESSAGE [RULE] per problem (rules: "
        "docs/reference/rules.md); exit 1 on any error.",
    )
    add_spec_argument(p, many=True)
    add_output_format(
        p,
        FORMATS,
        "text",
        help="text (default; problems on stderr), json, github (workflow annotations) or "
        "sarif (SARIF 2.1.0, for code-scanning upload); machine formats go to stdout",
    )
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    p.add_argument("-q", "--quiet", action="store_true", help="print problems only, no summary")
    p.set_defaults(func=run)


def run(args) -> int:
    from gpupool.present import diagnostics as present
    from gpupool.rules.engine import validate_file

    checked = []
    for path in spec_paths(args):
        result = validate_file(path)
        diagnostics = result.report.sorted()
        errors = sum(d.is_error for d in diagnostics)
        warnings = len(diagnostics) - errors
        ok = not errors and result.spec is not None and not (args.strict and warnings)
        if ok and result.spec is not None:
            spec = result.spec
            counted = [
                plural(len(spec.pools), "pool"),
                plural(len(spec.tiers), "tier"),
                plural(len(spec.tenants), "tenant"),
            ] + ([plural(warnings, "warning")] if warnings else [])
            summary = f"ok ({', '.join(counted)})"
        else:
            summary = (
                f"{plural(errors, 'error')}, {plural(warnings, 'warning')}"
                f"{' (--strict: warnings count as errors)' if args.strict and warnings else ''}"
            )
        item = present.Checked(result.loaded.path, diagnostics, ok, summary)
        checked.append(item)
        if args.output == "text":
            for d in diagnostics:
                print(d.render(), file=sys.stderr)
            if not args.quiet:
                print(f"{item.path}: {summary}", file=sys.stdout if ok else sys.stderr)
    if args.output != "text":
        if args.output == "json":
            sys.stdout.write(present.as_json(checked))
        elif args.output == "github":
            sys.stdout.write(present.as_github(checked))
        else:
            sys.stdout.write(present.as_sarif(checked, _version()))
        if not args.quiet:
            for item in checked:
                print(f"{item.path}: {item.summary}", file=sys.stderr)
    return 0 if all(c.ok for c in checked) else 1


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpupool")
    except PackageNotFoundError:  # pragma: no cover (running from a checkout without installing)
        return "0"
