"""How numbers are shown to people: device counts, GPU-equivalents, shares, money, signed deltas."""

from __future__ import annotations

from fractions import Fraction


def units(x: Fraction | int) -> str:
    """Device counts: integers as such, attributed (fractional) counts with two decimals."""
    x = Fraction(x)
    return str(int(x)) if x.denominator == 1 else f"{float(x):.2f}"


def eq(x: Fraction) -> str:
    return f"{float(x):.2f}"


def pct(x: Fraction) -> str:
    return f"{float(x) * 100:.1f}%"


def money(x: Fraction | None) -> str:
    return "unpriced" if x is None else f"{float(x):,.2f}"


def ratio(x: Fraction | None) -> str:
    return "-" if x is None else f"{float(x):.2f}x"


def signed(n: int) -> str:
    return f"+{n}" if n > 0 else str(n)
