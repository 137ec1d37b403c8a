"""A oneOf/anyOf refusal says what is wrong and what is right (issue 34): the message follows the branch the
value fits (a negative number meant the number), names the allowed forms, never quotes the value, and is the
same from jsonschema-rs and from the jsonschema reference."""

from __future__ import annotations

import copy

import pytest

from gpupool.spec import schema
from tests.test_validate_rules import BASE


def _with_queueing(tiers: dict) -> dict:
    data = copy.deepcopy(BASE)
    data["queueing"] = {"tiers": tiers}
    return data


def _messages(data: dict) -> list[tuple[tuple, str]]:
    return [(path, message) for path, _key, message, _rule in schema._errors(data)]


def _reference(data: dict) -> list[tuple[tuple, str]]:
    found = schema._jsonschema_validator().iter_errors(data)
    return sorted({(p, m) for e in found for p, _k, m in schema._humanize(e)})


def _tier() -> str:
    return BASE["tiers"][0]["name"]


def test_negative_borrowing_limit_says_too_small_and_the_forms():
    data = _with_queueing({_tier(): {"borrowingLimit": -3}})
    [(path, message)] = _messages(data)
    assert path == ("queueing", "tiers", _tier(), "borrowingLimit")
    assert "schema keyword" not in message
    assert message.startswith("-3 is too small; must be at least 0")
    assert "a whole number from 0 to 1000000" in message and "a mapping" in message


def test_a_value_of_no_allowed_form_names_the_forms_and_what_it_is_not_the_value():
    canary = "canary-\x1b[2J-text"
    data = _with_queueing({_tier(): {"borrowingLimit": canary, "lendingLimit": True}})
    got = dict(_messages(data))
    text = got[("queueing", "tiers", _tier(), "borrowingLimit")]
    assert text.startswith("must be a whole number from 0 to 1000000, or a mapping") and text.endswith("got a string")
    assert "canary" not in text and "\x1b" not in text
    assert got[("queueing", "tiers", _tier(), "lendingLimit")].endswith("got true")


def test_inside_the_mapping_form_the_entry_itself_is_located():
    data = _with_queueing({_tier(): {"lendingLimit": {"nvidia.com/gpu": -1}}})
    [(path, message)] = _messages(data)
    assert path == ("queueing", "tiers", _tier(), "lendingLimit", "nvidia.com/gpu")
    assert message == "-1 is too small; must be at least 0"


@pytest.mark.parametrize(
    "limit", [-3, "x", True, None, 2.5, {"nvidia.com/gpu": -1}, {"nvidia.com/gpu": "x"}, {"bad key": 1}, 10**7]
)
def test_rust_and_reference_validators_agree(limit):
    data = _with_queueing({_tier(): {"borrowingLimit": limit}})
    assert sorted(set(_messages(data))) == _reference(data)


def test_forms_are_described_from_the_schema():
    assert schema._form({"type": "integer", "minimum": 1}) == "a whole number at least 1"
    assert schema._form({"enum": ["a", "b"]}) == "one of a, b"
    assert schema._form({"$ref": "#/$defs/queueLimit/oneOf/0"}) == "a whole number from 0 to 1000000"
    assert schema._form({"type": "array", "items": {"type": "string"}}) == "a list whose items are each a string"
