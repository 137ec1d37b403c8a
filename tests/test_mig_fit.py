"""check_layout: valid/invalid layouts, placements checked independently, exhaustive agreement with an oracle."""

import importlib.util
import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.gpu.mig import GpuModel, MigProfile, catalog, check_layout

_spec = importlib.util.spec_from_file_location("_mig_oracle", Path(__file__).with_name("test_mig_oracle.py"))
oracle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oracle)


def model(name):
    return catalog().models[name]


FITS = [  # (model, layout) that must fit: reference 3.2 examples, presets-like mixes, 4-slice parts
    ("H100-80GB", {"1g.10gb": 4, "3g.40gb": 1}),
    ("H100-80GB", {"2g.20gb": 3, "1g.20gb": 1}),
    ("H100-80GB", {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}),
    ("H100-80GB", {"4g.40gb": 1, "3g.40gb": 1}),
    ("H100-80GB", {"1g.10gb": 6, "1g.20gb": 1}),
    ("H100-80GB", {"1g.10gb": 7}),
    ("H100-80GB", {"7g.80gb": 1, "1g.10gb": 0}),
    ("A100-40GB", {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
    ("A100-40GB", {"1g.10gb": 4}),
    ("A100-40GB", {"3g.20gb": 2}),
    ("A30-24GB", {"1g.6gb": 4}),
    ("A30-24GB", {"2g.12gb": 1, "1g.6gb": 2}),
    ("A30-24GB", {"2g.12gb+me": 1, "2g.12gb": 1}),
    ("B200-180GB", {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}),
    ("B200-180GB", {"1g.45gb": 4}),
    ("RTX-PRO-6000", {"1g.24gb+gfx": 2, "2g.48gb+gfx": 1}),
    ("RTX-PRO-6000", {"4g.96gb+gfx": 1}),
    ("RTX-PRO-6000", {"1g.24gb": 2, "2g.48gb": 1}),
]

# (model, layout, regex every reason list must match somewhere)
DOES_NOT_FIT = [
    ("H100-80GB", {"3g.40gb": 2, "1g.10gb": 1}, r"memory slices"),
    ("H100-80GB", {"4g.40gb": 1, "2g.20gb": 2}, r"compute slices"),
    ("H100-80GB", {"3g.40gb": 3}, r"maximum of 2 per H100-80GB"),
    ("H100-80GB", {"1g.10gb": 8}, r"maximum of 7"),
    ("H100-80GB", {"7g.80gb": 1, "1g.10gb": 1}, r"compute slices"),
    ("H100-80GB", {"1g.10gb+me": 2}, r"at most one \+me"),
    ("A100-40GB", {"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1}, r"compute slices"),
    ("A100-40GB", {"1g.10gb": 5}, r"maximum of 4"),
    ("A30-24GB", {"1g.6gb": 4, "1g.6gb+me": 1}, r"5 GPU instances exceed the maximum of 4"),
    ("A30-24GB", {"1g.6gb+me": 1, "2g.12gb+me": 1}, r"at most one \+me"),
    ("A30-24GB", {"2g.12gb": 2, "1g.6gb": 1}, r"compute slices"),
    ("B200-180GB", {"4g.90gb": 1, "2g.45gb": 2}, r"compute slices"),
    ("RTX-PRO-6000", {"1g.24gb+me": 1, "1g.24gb+me.all": 1}, r"at most one \+me"),
    ("RTX-PRO-6000", {"4g.96gb": 1, "1g.24gb": 1}, r"compute slices"),
    ("RTX-PRO-6000", {"2g.48gb": 1, "2g.48gb+gfx": 1, "1g.24gb": 1}, r"compute slices"),
]

INVALID = [  # (model, layout, regex)
    (
        "A100-40GB",
        {"1g.20gb": 1},
        r"not a MIG profile of A100-40GB \(valid: 1g\.5gb, .*7g\.40gb\); did you mean 1g\.10gb\?",
    ),
    ("H100-80GB", {"7g.79gb": 1}, r"did you mean 7g\.80gb\?"),
    ("H100-80GB", {"1g.5gb": 7}, r"did you mean 1g\.10gb\?"),
    (
        "A30-24GB",
        {"1g.10gb": 1},
        r"valid: 1g\.6gb, 1g\.6gb\+me, 2g\.12gb, 2g\.12gb\+me, 4g\.24gb.*did you mean 1g\.6gb",
    ),
    ("B200-180GB", {"3g.40gb": 1}, r"did you mean 3g\.90gb"),
    ("H100-80GB", {"1c.2g.20gb": 1}, r"compute-instance split.*device plugin.*`2g\.20gb`"),
    ("H100-80GB", {"2c.3g.40gb": 1, "1g.10gb": 1}, r"device plugin"),
    ("H100-80GB", {"1g.10gb": -1}, r"integer >= 0"),
    ("H100-80GB", {"1g.10gb": 1.5}, r"integer >= 0"),
    ("H100-80GB", {"1g.10gb": "2"}, r"integer >= 0"),
    ("H100-80GB", {"1g.10gb": True}, r"integer >= 0"),
    ("H100-80GB", {"1g.10gb": 0, "3g.40gb": 0}, r"empty"),
    ("H100-80GB", {}, r"empty"),
]


@pytest.mark.parametrize("model_name,layout", FITS)
def test_fits_with_valid_placement(model_name, layout):
    m = model(model_name)
    result = check_layout(m, layout)
    assert result.ok and bool(result) and not result.reasons
    oracle.check_placement(m, layout, result.placements)


@pytest.mark.parametrize("model_name,layout,pattern", DOES_NOT_FIT)
def test_does_not_fit(model_name, layout, pattern):
    m = model(model_name)
    result = check_layout(m, layout)
    assert not result.ok and not result.placements
    assert any(re.search(pattern, r) for r in result.reasons), result.reasons
    assert not oracle.oracle_fits(m, layout)


@pytest.mark.parametrize("model_name,layout,pattern", DOES_NOT_FIT)
def test_alternatives_offered_really_fit(model_name, layout, pattern):
    """The "would fit" hint must itself be valid and a sub-layout of the request."""
    m = model(model_name)
    hint = [r for r in check_layout(m, layout).reasons if r.startswith("would fit: ")]
    assert hint, "a failing layout with a fitting sub-layout should say what would fit"
    for alt in hint[0][len("would fit: ") :].split("; or "):
        sub = {}
        for part in alt.split(" + "):
            name, _, n = part.partition("×")
            sub[name] = int(n or 1)
        assert all(sub[p] <= layout[p] for p in sub)
        assert oracle.oracle_fits(m, sub), alt


@pytest.mark.parametrize("model_name,layout,pattern", INVALID)
def test_invalid(model_name, layout, pattern):
    result = check_layout(model(model_name), layout)
    assert not result.ok
    assert any(re.search(pattern, r) for r in result.reasons), result.reasons


@pytest.mark.parametrize(
    "model_name,layout,warn",
    [
        ("H100-80GB", {"1g.10gb+me": 1, "1g.10gb": 1}, True),
        ("H100-80GB", {"1g.10gb+me": 1, "1g.20gb": 1}, True),
        ("H100-80GB", {"1g.10gb+me": 1, "3g.40gb": 1}, False),
        ("H100-80GB", {"1g.10gb+me": 1}, False),
        ("H100-80GB", {"1g.10gb": 7}, False),
        ("A30-24GB", {"1g.6gb+me": 1, "1g.6gb": 2}, True),
        ("A30-24GB", {"2g.12gb+me": 1, "1g.6gb": 2}, False),
    ],
)
def test_me_plus_1g_is_a_warning_not_an_error(model_name, layout, warn):
    result = check_layout(model(model_name), layout)
    assert result.ok
    assert bool(result.warnings) is warn


@pytest.mark.parametrize("model_name", ["A100-40GB", "H100-80GB", "B200-180GB", "A30-24GB", "RTX-PRO-6000"])
def test_exhaustive_agreement_with_oracle(model_name):
    """Every layout with counts up to the per-profile max (RTX: up to 2 per profile) agrees with the oracle."""
    m = model(model_name)
    names = list(m.profiles)
    cap = 2 if len(names) > 7 else 7
    checked = 0
    for combo in itertools.product(*(range(min(m.profiles[p].max_count, cap) + 2) for p in names)):
        if sum(combo) > m.max_instances + 1:
            continue
        layout = {p: n for p, n in zip(names, combo) if n}
        if not layout:
            continue
        result = check_layout(m, layout)
        assert result.ok == oracle.oracle_fits(m, layout), layout
        if result.ok:
            oracle.check_placement(m, layout, result.placements)
        checked += 1
    assert checked > 100


def _synthetic() -> GpuModel:
    """A made-up geometry where capacity is fine but intervals collide, to exercise the placement search."""
    profiles = {
        "3g.a": MigProfile("3g.a", 1, 3, 1, (1,)),  # occupies [1,4)
        "2g.b": MigProfile("2g.b", 1, 2, 2, (0, 4)),  # [0,2) or [4,6)
        "1g.c": MigProfile("1g.c", 1, 1, 4, (0, 6, 7)),
    }
    return GpuModel("SYNTH", (), 8, 8, 8, 8, profiles, {})


@pytest.mark.parametrize(
    "layout,ok",
    [
        ({"3g.a": 1, "2g.b": 1}, True),
        ({"3g.a": 1, "2g.b": 2}, False),  # 7 of 8 slices but [0,2) overlaps [1,4)
        ({"2g.b": 2, "1g.c": 3}, False),  # 1g.c@0 collides with 2g.b@0
        ({"2g.b": 2, "1g.c": 2}, True),
        ({"3g.a": 1, "2g.b": 1, "1g.c": 3}, True),
    ],
)
def test_placement_search_on_synthetic_geometry(layout, ok):
    m = _synthetic()
    result = check_layout(m, layout)
    assert result.ok is ok
    if ok:
        oracle.check_placement(m, layout, result.placements)
    else:
        assert any("without overlap" in r and "allowed start slots" in r for r in result.reasons)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["H100-80GB", "A30-24GB", "RTX-PRO-6000", "B200-180GB", "A100-40GB"]), st.data())
def test_property_fit_matches_oracle(model_name, data):
    m = model(model_name)
    layout = data.draw(st.dictionaries(st.sampled_from(list(m.profiles)), st.integers(0, 8), max_size=5))
    result = check_layout(m, layout)
    assert result.ok == oracle.oracle_fits(m, layout)
    if result.ok:
        oracle.check_placement(m, layout, result.placements)
    else:
        assert result.reasons and all(isinstance(r, str) and r for r in result.reasons)
