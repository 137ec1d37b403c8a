"""Kubernetes resource quantities (500m, 2, 1.5Gi, 32000000000n, 1e3) as exact Fractions, for comparisons.

The grammar and the value are Kubernetes' own (k8s.io/apimachinery/pkg/api/resource, quantity.go
ParseQuantity and suffix.go): a number with an optional decimal suffix (n u m k M G T P E), binary suffix
(Ki Mi Gi Ti Pi Ei) or decimal exponent (e3, E-2, e+6); non-zero values finer than 1n round up to 1n, and
binary values stop at 2^63-1. gpupool is stricter in three places: no negative quantities (quotas and
defaults cannot be negative), exponents within e-64..e64 (10**(10**9) would take minutes and
gigabytes to compute), and a number must have a digit (Kubernetes reads "+", "k" or "e5" as 0).
tests/test_quantity.py checks all of it against a transliteration of ParseQuantity.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

DECIMAL_SUFFIXES = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
MAX_EXPONENT = 64
NANO = Fraction(1, 10**9)
MAX_BINARY = 2**63 - 1  # Kubernetes caps BinarySI quantities here
# The JSON Schema's pattern for a quantity (schemas/gpupool.schema.json $defs.quantity; a test keeps them equal).
PATTERN = "^[+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
_QUANTITY = re.compile(
    r"^\+?(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exp>[eE][-+]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)
EXAMPLES = "examples: 500m, 2, 1.5, 512Mi, 16Gi, 250n, 1e3"


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity; raises ValueError with a readable message."""
    text = str(value)
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"is not a Kubernetes quantity ({EXAMPLES})")
    number = Fraction(match["num"])
    if match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > MAX_EXPONENT:
            raise ValueError(
                f"has exponent {exponent if len(str(exponent)) <= 12 else '(too large)'}; Kubernetes quantities stay within "
                f"e-{MAX_EXPONENT}..e{MAX_EXPONENT} ({EXAMPLES})"
            )
        amount = number * Fraction(10) ** exponent
    elif match["suffix"] in BINARY_SUFFIXES:
        return min(_round_up_to_nano(number * BINARY_SUFFIXES[match["suffix"]]), Fraction(MAX_BINARY))
    else:
        amount = number * DECIMAL_SUFFIXES[match["suffix"] or ""]
    return _round_up_to_nano(amount)


def _round_up_to_nano(amount: Fraction) -> Fraction:
    """Kubernetes rounds a non-zero value up to the next nano unit (you asked for some, you get some)."""
    return Fraction(math.ceil(amount / NANO)) * NANO if amount else amount


def format_quantity(value: str | int | float) -> str:
    """Quantities as strings, the form Kubernetes stores (2 -> "2", 0.5 -> "0.5")."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
