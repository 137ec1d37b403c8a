"""`gpupool validate SPEC...`: every problem in every spec, located, in one run."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("validate", help="check specs without touching a cluster",
                       description="Check one or more stack specs (and the tenant files they include). "
                                   "Prints FILE:LINE:COL: error: MESSAGE per problem; exit 1 on any error.")
    p.add_argument("specs", nargs="+", metavar="SPEC")
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    p.add_argument("-q", "--quiet", action="store_true", help="print problems only, no summary")
    p.set_defaults(func=run)


def run(args) -> int:
    from gpupool.rules.engine import validate_file

    failed = False
    for path in args.specs:
        result = validate_file(path)
        diagnostics = result.report.sorted()
        for d in diagnostics:
            print(d.render(), file=sys.stderr)
        errors = sum(d.is_error for d in diagnostics)
        warnings = len(diagnostics) - errors
        bad = errors or result.spec is None or (args.strict and warnings)
        failed = failed or bool(bad)
        if not args.quiet:
            if result.spec is not None and not bad:
                spec = result.spec
                print(f"{path}: ok ({len(spec.pools)} pools, {len(spec.tiers)} tiers, {len(spec.tenants)} tenants"
                      f"{f', {warnings} warnings' if warnings else ''})")
            else:
                print(f"{path}: {errors} errors, {warnings} warnings"
                      f"{' (--strict: warnings count as errors)' if args.strict and warnings else ''}", file=sys.stderr)
    return 1 if failed else 0
