"""Kubernetes resource quantities (500m, 2, 1.5Gi) as exact Fractions, for comparisons."""
from __future__ import annotations

import re
from fractions import Fraction

_SUFFIX = {
    "": 1, "m": Fraction(1, 1000), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}
MAX_EXPONENT = 64
_QUANTITY = re.compile(r"^\+?(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:(?P<exp>[eE][-+]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E))?$")


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity; raises ValueError with a readable message."""
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f'"{text}" is not a Kubernetes quantity (examples: 500m, 2, 1.5, 512Mi, 16Gi)')
    number = Fraction(match["num"])
    if match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > MAX_EXPONENT:  # 10**(10**9) would take minutes and gigabytes to compute
            raise ValueError(f'"{text}" has exponent {exponent}; Kubernetes quantities stay within '
                             f"e-{MAX_EXPONENT}..e{MAX_EXPONENT} (examples: 500m, 2, 1.5e3, 16Gi)")
        return number * Fraction(10) ** exponent
    return number * _SUFFIX[match["suffix"] or ""]


def format_quantity(value: str | int | float) -> str:
    """Quantities as strings, the form Kubernetes stores (2 -> "2", 0.5 -> "0.5")."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
