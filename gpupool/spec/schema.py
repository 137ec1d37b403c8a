"""The JSON Schema of the spec, and schema errors turned into located, human diagnostics."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpupool.spec.diagnostics import ERROR, Report, did_you_mean, one_of
from gpupool.spec.loader import LoadedSpec


def _schema_dir() -> Path:
    """gpupool/schemas in an installed wheel (pyproject maps schemas/ there); else the repository's
    schemas/, the source the editor modelines point at (a source checkout or an editable install)."""
    packaged = Path(__file__).resolve().parents[1] / "schemas"
    return packaged if (packaged / "gpupool.schema.json").is_file() else Path(__file__).resolve().parents[2] / "schemas"


SCHEMA_DIR = _schema_dir()
SPEC_SCHEMA = SCHEMA_DIR / "gpupool.schema.json"
SCHEMA_RULE = "GP010"  # documented in gpupool/rules/loading.py

DNS_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_PATTERN_HINTS = {
    DNS_LABEL_PATTERN: "must be a DNS-1123 label: lowercase letters, digits and '-', starting and ending "
    "with a letter or digit, at most 63 characters",
    "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$": "must be a valid Kubernetes label value: letters, digits, "
    "'-', '_' and '.', starting and ending with a letter or digit, at most 63 characters",
    "^nvidia\\.com/": "must be an NVIDIA resource name starting with nvidia.com/",
    "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$": "must be a valid Kubernetes label key: an optional DNS prefix and one '/', then a name of at most 63 "
    "letters, digits, '-', '_' and '.' starting and ending with a letter or digit (e.g. team or "
    "example.com/team)",
    "^v?[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.-]+)?$": "must be a chart version such as v26.7.0 (a pinned "
    "MAJOR.MINOR.PATCH, optionally with a v prefix and a -suffix)",
    "^[+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$": "must be a Kubernetes quantity: a number with an optional suffix n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, "
    "Ti, Pi, Ei or an exponent such as e3 (examples: 500m, 2, 1.5, 512Mi, 16Gi, 250n)",
    "^nvidia\\.com/[A-Za-z0-9][-A-Za-z0-9_.+]*$": "must be an NVIDIA resource name such as nvidia.com/gpu, "
    "nvidia.com/mig-1g.10gb or nvidia.com/gpu.shared",
    "^(0|([0-9]+(ms|s|m|h|d|w|y))+)$": "must be a Prometheus duration: a number and a unit, repeated with units "
    "from the largest (y, w, d, h, m, s, ms), e.g. 30m, 2h, 1h30m; 0 alone for none",
}
_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "null": "empty",
}


@functools.lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(SPEC_SCHEMA.read_text())


@functools.lru_cache(maxsize=1)
def _validator():
    """The spec schema compiled by jsonschema-rs (Rust): it lists every error, and importing and running it
    costs a fraction of jsonschema's time (bench/bench_validate.py)."""
    import jsonschema_rs

    return jsonschema_rs.Draft202012Validator(schema())


def _jsonschema_validator():
    """The reference implementation (tests compare against it; also used for text jsonschema-rs cannot take)."""
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema())
    return Draft202012Validator(schema())


class _SchemaError:
    """The parts of a jsonschema ValidationError that _humanize reads, from a jsonschema-rs error."""

    __slots__ = (
        "validator",
        "validator_value",
        "instance",
        "absolute_path",
        "schema",
        "schema_path",
        "message",
        "branches",
    )

    def __init__(self, validator, value, instance, path, schema_, schema_path, message, branches=()):
        self.validator = validator
        self.validator_value = value
        self.instance = instance
        self.absolute_path = path
        self.schema = schema_
        self.schema_path = schema_path
        self.message = message
        self.branches = branches  # oneOf/anyOf: the errors of each branch, in the schema's order


def _at(schema_path: tuple) -> tuple[Any, Any]:
    """(the subschema holding the keyword, the keyword's value) for a jsonschema-rs keyword location, which
    is absolute (references already resolved: $defs/tenant/properties/gpus/...)."""
    node: Any = schema()
    for part in schema_path[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, node.get(schema_path[-1]) if isinstance(node, dict) else None


def _rs_errors(instance: Any) -> Iterator[Any]:
    yield from _converted(_validator().iter_errors(instance))


def _converted(errors: Any) -> Iterator[Any]:
    """jsonschema-rs errors as _SchemaError, in jsonschema's shape."""
    seen: set[tuple] = set()
    for e in errors:
        kind = e.kind.name
        if kind == "propertyNames":  # as jsonschema: the key is the instance, the mapping's path the path
            inner = e.kind.error
            spath = tuple(inner.schema_path)
            sub, value = _at(spath)
            yield _SchemaError(
                inner.kind.name, value, inner.instance, tuple(e.instance_path), sub, spath, inner.message
            )
            continue
        spath = tuple(e.schema_path)
        if kind == "required":  # one error per missing key; jsonschema reports the keyword once
            key = (tuple(e.instance_path), spath)
            if key in seen:
                continue
            seen.add(key)
        sub, value = _at(spath)
        # oneOf/anyOf: what each branch refused, so that the message can follow the branch that fits best
        branches = tuple(list(_converted(c)) for c in getattr(e.kind, "context", None) or ())
        yield _SchemaError(kind, value, e.instance, tuple(e.instance_path), sub, spath, e.message, branches)


def _iter_errors(instance: Any) -> Iterator[Any]:
    try:
        errors = list(_rs_errors(instance))
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in YAML) is not UTF-8, which Rust strings need
        errors = list(_jsonschema_validator().iter_errors(instance))
    yield from errors


def _describe(value: Any) -> str:
    """What a refused value is, without quoting it: text from a tenant file is untrusted input (it may hold
    newlines, terminal escapes or someone else's secret) and is named by its location only. Numbers and
    booleans are shown, as gpupool prints them (never the file's own text), when short."""
    if value is None:
        return "nothing (empty)"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, (dict, list)):
        return _TYPE_NAMES["object" if isinstance(value, dict) else "array"]
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        shown = repr(value)
        return shown if len(shown) <= 24 else "a number"
    return "a value"


def _subject(value: Any) -> str:
    """The refused value as the subject of a message: "5 is too small", "this text is not allowed"."""
    return "this text" if isinstance(value, str) else _describe(value)


def _expected(schema_part: Any) -> str:
    if isinstance(schema_part, list):
        return " or ".join(_TYPE_NAMES.get(t, str(t)) for t in schema_part)
    return _TYPE_NAMES.get(schema_part, str(schema_part))


def check(loaded: LoadedSpec, report: Report) -> set[tuple]:
    """Validate loaded.data against the schema. Returns the set of paths that had schema errors.

    Keys (and list items' names) the schema refuses are recorded in loaded.refused and loaded.unnamed: every path shown from
    then on names them by position (gpus[key 2], tenants[3]), since refused input is never quoted back."""
    bad: set[tuple] = set()
    # A value the loader could not read (bad tag, .nan) is already reported there: one error per problem.
    unreadable = {d.location for d in report.errors}
    found = list(_errors(loaded.data))
    loaded.refused.update(path for path, key_error, _, _ in found if key_error)
    loaded.unnamed.update(path[:-1] for path, key_error, _, _ in found if not key_error and path[-1:] == ("name",))
    for path, key_error, message, rule in found:
        where = loaded.source.key(path) if key_error else loaded.source.value(path)
        bad.add(path)
        if where in unreadable and not key_error:
            continue
        report.add(ERROR, where, loaded.render(path), message, rule)
    return bad


def _errors(data: Any) -> Iterator[tuple[tuple, bool, str, str]]:
    """(path, points_at_key, message, rule id) per schema error, most specific first. A bound a consumer
    imposes (gpupool.spec.bounds) is reported under its own id, with the consumer's reason."""
    if not isinstance(data, dict):
        yield (
            (),
            False,
            f"the spec must be a mapping with keys apiVersion, kind, cluster, nodePools; got {_describe(data)}",
            SCHEMA_RULE,
        )
        return
    from gpupool.spec.bounds import bound_at

    for error in _iter_errors(data):
        bound = bound_at(tuple(error.schema_path), error.validator)
        for path, key_error, message in _humanize(error):
            yield (
                (path, key_error, f"{message}: {bound.why}", bound.rule)
                if bound
                else (path, key_error, message, SCHEMA_RULE)
            )


def _humanize(error) -> Iterator[tuple[tuple, bool, str]]:
    """Messages say what is wrong and what would be right, and never repeat the refused key or value: the
    location (FILE:LINE:COL and the spec path) names it."""
    path = tuple(error.absolute_path)
    kind = error.validator
    value = error.instance
    if "propertyNames" in error.schema_path:
        # propertyNames errors carry the key as instance and the mapping as path: point at the key.
        yield path + (str(value),), True, f"this key {_key_hint(error, kind, value)}"
        return
    if kind == "additionalProperties":
        allowed = list(error.schema.get("properties", {}))
        extras = [k for k in value if k not in error.schema.get("properties", {})]
        for key in extras:
            hint = did_you_mean(key, allowed)
            yield (
                path + (key,),
                True,
                f"unknown key{hint}; valid keys here: {one_of(allowed)}" if allowed else "unknown key: no keys here",
            )
    elif kind == "required":
        missing = error.validator_value
        absent = [k for k in missing if k not in value]
        for key in absent:
            example = error.schema.get("properties", {}).get(key, {})
            example = f"; add {key}: {example['const']}" if isinstance(example, dict) and "const" in example else ""
            yield path, False, (f'missing required key "{key}"{example} (required here: {", ".join(missing)})')
    elif kind == "type":
        yield path, False, _type_message(error, value)
    elif kind == "enum":
        choices = ", ".join(str(c) for c in error.validator_value)
        guess = did_you_mean(value, map(str, error.validator_value)) if isinstance(value, str) else ""
        got = "" if isinstance(value, str) else f"; got {_describe(value)}"
        yield path, False, f"must be one of: {choices}{guess}{got}"
    elif kind == "const":
        got = "" if isinstance(value, str) else f", got {_describe(value)}"
        yield path, False, f'expected "{error.validator_value}"{got}'
    elif kind == "pattern":
        yield path, False, _PATTERN_HINTS.get(error.validator_value, f"must match {error.validator_value}")
    elif kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        yield path, False, _bound_message(error, kind, path, value)
    elif kind in ("minLength", "maxLength"):
        yield path, False, _length_message(error, kind, value)
    elif kind in ("minItems", "minProperties"):
        yield (
            path,
            False,
            f"must not be empty (at least {error.validator_value} entr{'y' if error.validator_value == 1 else 'ies'})",
        )
    elif kind in ("oneOf", "anyOf"):
        yield from _humanize_choice(error, path, value)
    else:  # the validator's own message quotes the instance: say which keyword refused it instead
        yield path, False, f"is not allowed here (schema keyword {kind}); see schemas/gpupool.schema.json"


def _key_hint(error, kind: str, value: Any) -> str:
    """What is wrong with a key propertyNames refused, said without repeating the key."""
    if kind == "pattern":
        return _PATTERN_HINTS.get(error.validator_value, f"must match {error.validator_value}")
    if kind == "maxLength":
        return f"is {len(str(value))} characters long; keys here may be at most {error.validator_value} characters"
    return f"is not allowed here ({kind})"


def _type_message(error, value: Any) -> str:
    """A wrong type, with a hint when YAML read text the user meant (no, 0123) as a bool or a number."""
    hint = ""
    wants_text = "string" in (
        error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
    )
    if wants_text and isinstance(value, bool):
        hint = ' (YAML reads unquoted yes/no/on/off/true/false as true or false: quote the text, e.g. "no")'
    elif wants_text and isinstance(value, (int, float)):
        shown = _describe(value)
        example = f'"{shown}"' if shown != "a number" else '"0123"'
        hint = f" (YAML reads it as a number: quote it to give text, e.g. {example})"
    return f"expected {_expected(error.validator_value)}, got {_describe(value)}{hint}"


def _bound_message(error, kind: str, path: tuple, value: Any) -> str:
    """A number past a minimum or maximum (exclusive or not); replicas: 1 is told how to turn sharing off instead."""
    word = {
        "minimum": "at least",
        "maximum": "at most",
        "exclusiveMinimum": "greater than",
        "exclusiveMaximum": "less than",
    }[kind]
    extra = ""
    if path and path[-1] == "replicas" and kind == "minimum":
        extra = " (1 replica is no sharing: remove the block to turn sharing off)"
    return f"{_subject(value)} is too {'small' if 'inimum' in kind else 'large'}; must be {word} {error.validator_value}{extra}"


def _length_message(error, kind: str, value: Any) -> str:
    """A string shorter than minLength (empty is said as such) or longer than maxLength."""
    length = f" is {len(value)} characters long;" if isinstance(value, str) else ""
    return (
        "is empty; give a value"
        if kind == "minLength" and not value
        else f"{_subject(value)}{length} must be {'at least' if kind == 'minLength' else 'at most'} "
        f"{error.validator_value} characters long"
    )


def _branches(error) -> list[list[Any]]:
    """The errors of each branch of a oneOf/anyOf error: jsonschema-rs's context as converted above, or
    jsonschema's flat `context` grouped by the branch index its relative schema path starts with."""
    if isinstance(error, _SchemaError):
        return [list(b) for b in error.branches]
    by_index: dict[int, list[Any]] = {i: [] for i in range(len(error.validator_value))}
    for e in error.context or ():
        by_index.setdefault(e.schema_path[0], []).append(e)
    return [by_index[i] for i in sorted(by_index)]


def _humanize_choice(error, path: tuple, value: Any) -> Iterator[tuple[tuple, bool, str]]:
    """A oneOf/anyOf refusal: the forms allowed, then what is wrong in the form the value fits best. Like
    jsonschema's best_match, a branch whose `type` the value has is the one meant (a negative number meant the
    number, not the mapping); with no such branch, or several, the forms and what the value is."""
    allowed = ", or ".join(_form(b) for b in error.validator_value)
    branches = _branches(error)
    if branches and all(not errs for errs in branches):  # oneOf: it fits more than one
        yield path, False, f"fits more than one of the allowed forms; must be exactly one of: {allowed}"
        return
    typed = [
        errs
        for errs in branches
        if errs and not any(e.validator == "type" and tuple(e.absolute_path) == path for e in errs)
    ]
    if len(typed) == 1:
        for where, key_error, message in (h for e in typed[0] for h in _humanize(e)):
            here = where == path and not key_error
            yield where, key_error, (f"{message} (allowed here: {allowed})" if here else message)
        return
    yield path, False, f"must be {allowed}; got {_describe(value)}"


def _form(branch: Any) -> str:
    """One allowed form of a oneOf/anyOf, in words, from the schema (never from the value)."""
    if isinstance(branch, dict) and isinstance(branch.get("$ref"), str) and branch["$ref"].startswith("#/"):
        node: Any = schema()
        for part in branch["$ref"][2:].split("/"):
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                node = node.get(part, {}) if isinstance(node, dict) else {}
        branch = {**node, **{k: v for k, v in branch.items() if k != "$ref"}}
    if not isinstance(branch, dict):
        return "a value of another form"
    if "const" in branch:
        return json.dumps(branch["const"])
    if "enum" in branch:
        return "one of " + ", ".join(str(c) for c in branch["enum"])
    kind = branch.get("type")
    if isinstance(kind, list):
        return _expected(kind)
    if kind in ("integer", "number"):
        bounds = [
            f"{word} {branch[key]}"
            for key, word in (
                ("minimum", "at least"),
                ("exclusiveMinimum", "greater than"),
                ("maximum", "at most"),
                ("exclusiveMaximum", "less than"),
            )
            if isinstance(branch.get(key), (int, float))
        ]
        if "minimum" in branch and "maximum" in branch and len(bounds) == 2:
            return f"{_TYPE_NAMES[kind]} from {branch['minimum']} to {branch['maximum']}"
        return _TYPE_NAMES[kind] + (" " + " and ".join(bounds) if bounds else "")
    if kind == "object":
        values = branch.get("additionalProperties")
        return "a mapping" + (f" whose values are each {_form(values)}" if isinstance(values, dict) and values else "")
    if kind == "array":
        items = branch.get("items")
        return "a list" + (f" whose items are each {_form(items)}" if isinstance(items, dict) and items else "")
    if kind == "string":
        hint = _PATTERN_HINTS.get(branch.get("pattern", ""))
        return "a string" + (f" that {hint}" if hint else "")
    return _TYPE_NAMES.get(kind, "a value of another form") if isinstance(kind, str) else "a value of another form"
