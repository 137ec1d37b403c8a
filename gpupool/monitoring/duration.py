"""Prometheus' duration grammar, as prometheus/common model/time.go ParseDuration reads it.

`[0-9]+` followed by a unit, repeated, units in order from the largest: `y` (365d), `w` (7d), `d` (24h), `h`,
`m`, `s`, `ms` (`1h30m`, `2w3d`; `30m2h` is refused, so "1m1d" cannot mean a month and a day); `0` alone is
allowed without a unit; the total must fit Go's time.Duration (at most 2^63 - 1 ns, about 292 years), else
"duration out of range". Anything Prometheus would refuse is refused here with a message naming the rule.
"""

from __future__ import annotations

import re

# unit -> (position in the required order, milliseconds)
UNITS = {
    "y": (1, 365 * 24 * 3600 * 1000),
    "w": (2, 7 * 24 * 3600 * 1000),
    "d": (3, 24 * 3600 * 1000),
    "h": (4, 3600 * 1000),
    "m": (5, 60 * 1000),
    "s": (6, 1000),
    "ms": (7, 1),
}
MAX_NS = (1 << 63) - 1  # Go's time.Duration
_PART = re.compile(r"([0-9]+)([a-z]+)")
GRAMMAR = "a number and a unit, repeated with units from the largest: 30s, 5m, 1h30m, 7d, 2w, 1y (ms, s, m, h, d, w, y)"


class DurationError(ValueError):
    """Not a duration Prometheus accepts; the message says why, without quoting the text."""


def parse_ms(text: str) -> int:
    """TEXT in milliseconds (DurationError when Prometheus would refuse it)."""
    if text == "0":
        return 0
    if not text or not text.isascii():
        raise DurationError(f"not a duration: give {GRAMMAR}")
    total, last, at = 0, 0, 0
    for match in _PART.finditer(text):
        if match.start() != at:
            break
        at = match.end()
        unit = UNITS.get(match.group(2))
        if unit is None:
            raise DurationError(f"unknown unit: give {GRAMMAR}")
        if unit[0] <= last:
            raise DurationError(
                f"units must go from the largest to the smallest, each once (1h30m, not 30m1h): give {GRAMMAR}"
            )
        last = unit[0]
        if len(match.group(1)) > 20:
            raise DurationError("duration out of range: Prometheus holds at most 2^63 ns (about 292 years)")
        total += int(match.group(1)) * unit[1]
    if at != len(text) or last == 0:
        raise DurationError(f"not a duration: give {GRAMMAR}")
    if total * 1_000_000 > MAX_NS:
        raise DurationError("duration out of range: Prometheus holds at most 2^63 ns (about 292 years)")
    return total


def parse_seconds(text: str) -> float:
    """TEXT in seconds (DurationError when Prometheus would refuse it)."""
    return parse_ms(text) / 1000
