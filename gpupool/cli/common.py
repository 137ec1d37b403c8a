"""What every command that needs a valid spec does first."""
from __future__ import annotations

import sys


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
