"""Quantities: gpupool's parser and the schema's pattern, property-tested against Kubernetes' own rules.

The oracle below transliterates k8s.io/apimachinery v0.36.3 pkg/api/resource/quantity.go
(ParseQuantity, parseQuantityString) and suffix.go (the suffix tables, interpret) line by line, value
semantics included: round a non-zero value up to 1n, cap binary-suffixed values at 2^63-1, and the slow
path's need for a digit ("k" is 0 but "Ei" is an error). tests/e2e/test_quantity_kubernetes.py checks the
transliteration against the real ParseQuantity compiled from the Go module cache.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpupool.spec import quantity
from gpupool.spec.quantity import MAX_EXPONENT, parse_quantity

ROOT = Path(__file__).resolve().parent.parent

_DEC = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BIN = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARS = "eEinumkKMGTP"


def parse_quantity_string(s: str):
    """quantity.go parseQuantityString: (positive, value, num, denom, suffix) or None (ErrFormatWrong)."""
    positive, pos, end = True, 0, len(s)
    if pos < end and s[0] in "+-":
        positive = s[0] == "+"
        pos += 1
    i = pos
    while True:  # Zeroes
        if i >= end:
            return positive, "0", "0", "", ""
        if s[i] != "0":
            break
        pos += 1
        i += 1
    i = pos
    while True:  # Num
        if i >= end:
            return positive, s[0:end], s[pos:end], "", ""
        if not ("0" <= s[i] <= "9"):
            num, pos = s[pos:i], i
            break
        i += 1
    num = num or "0"
    denom = ""
    if pos < end and s[pos] == ".":
        pos += 1
        i = pos
        while True:  # Denom
            if i >= end:
                return positive, s[0:end], num, s[pos:end], ""
            if not ("0" <= s[i] <= "9"):
                denom, pos = s[pos:i], i
                break
            i += 1
    value = s[0:pos]
    start = i = pos
    while True:
        if i >= end:
            return positive, value, num, denom, s[start:end]
        if s[i] not in _SUFFIX_CHARS:
            pos = i
            break
        i += 1
    if pos < end and s[pos] in "+-":
        pos += 1
    i = pos
    while True:  # Suffix
        if i >= end:
            return positive, value, num, denom, s[start:end]
        if not ("0" <= s[i] <= "9"):
            return None
        i += 1


def k8s_parse(s: str) -> tuple[Fraction, int | None] | None:
    """quantity.go ParseQuantity: (value, decimal exponent or None), or None where it returns an error."""
    if s == "":
        return None
    if s == "0":
        return Fraction(0), None
    parts = parse_quantity_string(s)
    if parts is None:
        return None
    positive, value, num, denom, suffix = parts
    exponent = None
    if suffix in _DEC:  # interpret(): the decimal table, the binary table, then an exponent
        base, exp = 10, _DEC[suffix]
    elif suffix in _BIN:
        base, exp = 2, _BIN[suffix]
    elif (
        len(suffix) > 1
        and suffix[0] in "eE"
        and re.fullmatch(r"[-+]?[0-9]+", suffix[1:])
        and -(2**63) <= int(suffix[1:]) < 2**63
    ):
        base, exp = 10, int(suffix[1:])
        exponent = exp
    else:
        return None  # ErrSuffix
    # The int64 fast path, or the inf.Dec slow path, which parses `value` and needs a digit in it.
    if base == 10:
        precision, scale = 18 - (len(num) + len(denom)), exp - len(denom)
    elif exp >= 0 and not denom:
        precision, scale = 15 - len(num) - int(exp * 3 / 10) - 1, 0
    else:
        precision, scale = -1, 0
    fast = precision >= 0 and scale >= -9 and int(num + denom) * (2**exp if base == 2 else 1) < 2**63
    if not fast and not re.search("[0-9]", value):
        return None  # ErrNumeric: inf.Dec.SetString("") / ("+") / (".")
    number = Fraction(int(num + denom), 10 ** len(denom))
    amount = number * (Fraction(10) ** exp if base == 10 else 2**exp)
    if amount:
        amount = Fraction(math.ceil(amount * 10**9), 10**9)  # round up to 1n
    if base == 2 and amount > 2**63 - 1:
        amount = Fraction(2**63 - 1)
    return (amount if positive else -amount), exponent


def gpupool_parse(s: str) -> Fraction | None:
    try:
        return parse_quantity(s)
    except ValueError:
        return None


_grammar = st.builds(
    lambda sign, whole, dot, frac, suffix: sign + whole + dot + frac + suffix,
    st.sampled_from(["", "+", "-"]),
    st.text("0123456789", max_size=6),
    st.sampled_from(["", "."]),
    st.text("0123456789", max_size=4),
    st.one_of(
        st.sampled_from(list(_DEC) + list(_BIN) + ["K", "Ki", "mi", "e", "E", "e+", "iB", "KB"]),
        st.builds(
            lambda e, sign, digits: e + sign + digits,
            st.sampled_from("eE"),
            st.sampled_from(["", "+", "-"]),
            st.text("0123456789", min_size=1, max_size=3),
        ),
    ),
)
_noise = st.text(alphabet="0123456789.+-eEinumkKMGTPi x", max_size=10)


@settings(max_examples=800, deadline=None)
@given(st.one_of(_grammar, _noise))
@example("32000000000n")
@example("1u")
@example("1.5Gi")
@example("1e3")
@example("1E")
@example("+")
@example("1.")
@example("0.1n")
@example("8Ei")
@example("9Ei")
@example("1e-12")
@example("-1")
@example("1e65")
@example(".5k")
@example("-0")
@example(".Mi")
@example("e5")
@example("k")
@example("1e+3")
def test_gpupool_parses_what_kubernetes_parses_to_the_same_value(text):
    ours = gpupool_parse(text)
    theirs = k8s_parse(text)
    if ours is not None:
        assert theirs is not None, f"{text!r}: gpupool accepts what Kubernetes rejects"
        assert ours == theirs[0], text
        return
    if theirs is None:
        return
    value, exponent = theirs
    assert stricter_on_purpose(text, exponent), f"{text!r}: Kubernetes accepts it as {value}, gpupool rejects it"


def stricter_on_purpose(text: str, exponent: int | None) -> bool:
    """Where gpupool refuses what Kubernetes reads, on purpose and with a clear message."""
    return (
        text.startswith("-")  # no negative quantities
        # no number at all: Kubernetes reads "+", "k", ".Mi" or "e5" as 0
        or not re.match(r"^[+-]?([0-9]|\.[0-9])", text)
        or (exponent is not None and abs(exponent) > MAX_EXPONENT)
    )


@settings(max_examples=500, deadline=None)
@given(st.one_of(_grammar, _noise))
def test_the_schema_pattern_accepts_exactly_what_the_parser_reads(text):
    matches = re.search(quantity.PATTERN, text) is not None
    parsed = gpupool_parse(text) is not None
    if parsed:
        assert matches, text
    elif matches:  # only the exponent bound is the parser's own
        assert abs(int(re.search(r"[eE]([-+]?[0-9]+)$", text).group(1))) > MAX_EXPONENT, text


def test_the_schema_and_its_hint_use_the_parsers_pattern():
    from gpupool.spec import schema

    defs = json.loads((ROOT / "schemas" / "gpupool.schema.json").read_text())["$defs"]
    assert defs["quantity"]["pattern"] == quantity.PATTERN
    assert quantity.PATTERN in schema._PATTERN_HINTS


@pytest.mark.parametrize(
    "text, value",
    [
        ("32000000000n", Fraction(32)),
        ("500u", Fraction(1, 2000)),
        ("250m", Fraction(1, 4)),
        ("2k", 2000),
        ("1Ki", 1024),
        ("1.5Gi", 3 * 2**29),
        ("1Ei", 2**60),
        ("1e3", 1000),
        ("1E-3", Fraction(1, 1000)),
        ("1E", 10**18),
        ("0.1n", Fraction(1, 10**9)),
        ("9Ei", 2**63 - 1),
        (".5", Fraction(1, 2)),
        ("5.", 5),
    ],
)
def test_every_suffix(text, value):
    assert parse_quantity(text) == value
    assert k8s_parse(text)[0] == value  # the oracle agrees on the hand-picked cases too


@pytest.mark.parametrize("text", ["1K", "1KiB", "1mi", "1e", "1e+", "-1", "1 Gi", ".", "1e3k", "1.5e3.5"])
def test_not_quantities(text):
    with pytest.raises(ValueError, match="Kubernetes quantity"):
        parse_quantity(text)


def test_a_spec_with_nano_and_micro_quantities_validates(tmp_path):
    """`cpu: 32000000000n` is valid Kubernetes; the schema and the quota rules read it as 32 cores."""
    from gpupool.k8s import manifests
    from gpupool.rules.engine import validate_file

    stack = tmp_path / "dev"
    shutil.copytree(ROOT / "stacks" / "dev", stack)
    tenant = stack / "tenants" / "inference.yaml"
    text = tenant.read_text()
    for old, new in (('cpu: "32"', "cpu: 32000000000n"), ("requests: {cpu: 500m", "requests: {cpu: 500000u")):
        assert old in text
        text = text.replace(old, new)
    tenant.write_text(text)
    result = validate_file(str(stack / "spec.yaml"))
    assert result.spec is not None, [d.render() for d in result.report.sorted()]
    quota = next(o for o in manifests.build(result.spec).objects if o.name == "tenant-inference-compute-quota")
    assert quota.manifest["spec"]["hard"]["requests.cpu"] == "32000000000n"
