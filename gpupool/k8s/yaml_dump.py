"""Deterministic YAML for everything gpupool writes (rendered objects, the MIG Manager and device-plugin configs):
fixed key order, block style, no aliases, and every string a Go or YAML 1.2 reader could misread quoted."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

import yaml


def dump_yaml(data: Any) -> str:
    """Deterministic YAML: fixed key order as built, block style, no aliases, `|` blocks for embedded configs."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def _str_representer(dumper: _Dumper, text: str) -> yaml.ScalarNode:
    style = "'" if reads_as_non_string(text) else "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


# YAML 1.1 (PyYAML, Go's yaml.v2 behind kubectl) and 1.2 (yaml.v3, kyaml) words for booleans and null, and
# what YAML 1.1 also resolves specially (merge key, value key).
_NON_STRING_WORDS = {"", "~", "null", "true", "false", "yes", "no", "on", "off", "y", "n", "<<", "="}
_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?$")  # YAML 1.1: 1:20, 190:20:30.15
_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}")  # YAML 1.1 timestamps start so
_HEX_PREFIX = re.compile(r"^[-+]?0[xX]")  # float.fromhex alone also takes "cafe"
_DOT_SPECIAL = re.compile(r"^[-+]?\.(inf|nan)$", re.IGNORECASE)  # .inf, -.Inf, .NaN


@functools.lru_cache(maxsize=1 << 16)  # the same label values and keys recur in every tenant's objects
def reads_as_non_string(text: str) -> bool:
    """Whether a YAML 1.1 or 1.2 reader could take TEXT, written plain, for a number, boolean or null.

    PyYAML quotes only what its own YAML 1.1 resolver would misread: `0815` (no octal: 8) and `12e3` (no
    dot) it writes plain, and Go's readers take both for floats (strconv.ParseFloat accepts them), so a
    label value `0815` made `kubectl create` fail ("cannot unmarshal number ... of type string"). This is
    deliberately wider than any one reader: quoting a string never changes what it reads as."""
    if text.lower() in _NON_STRING_WORDS:
        return True
    bare = text.replace("_", "")  # YAML 1.1 numbers may hold underscores (1_000)
    hex_float = lambda t: float.fromhex(t) if _HEX_PREFIX.match(t) else float("x")  # noqa: E731 (Go: 0x1p-2)
    for parse in (float, lambda t: int(t, 0), hex_float):  # decimal/exponent/inf/nan; 0x/0o/0b; hex floats
        try:
            parse(bare)
            return True
        except ValueError:
            pass
    return bool(_SEXAGESIMAL.match(text) or _TIMESTAMP.match(text) or _DOT_SPECIAL.match(text))


# libyaml's emitter is ~10x faster than PyYAML's own (rendering a 1,000-tenant stack is mostly this call).
# PyYAML built without libyaml has no CSafeDumper; mypy checks against SafeDumper (same representer API).
if TYPE_CHECKING:
    _BaseDumper = yaml.SafeDumper
else:
    _BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):
    def ignore_aliases(self, data):
        return True


_Dumper.add_representer(str, _str_representer)
