"""docs/reference/spec-reference.md, the field reference of the spec and tenant files, generated from the JSON Schema:
`python -m gpupool.spec.reference` (or `--check`; tests/test_spec_reference.py fails while it is stale).

Every field is one row: its path (`nodePools[].sharing.mig.preset`), its type and constraints, whether it
is required, its default and its description, all read from schemas/gpupool.schema.json, so the reference
cannot drift from what `gpupool validate` accepts. Semantic checks beyond the schema are in docs/reference/rules.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DOCS_PATH = Path(__file__).resolve().parents[2] / "docs" / "reference" / "spec-reference.md"


def _schema() -> dict:
    from gpupool.spec.schema import SCHEMA_DIR

    return json.loads((Path(SCHEMA_DIR) / "gpupool.schema.json").read_text(encoding="utf-8"))


def _resolve(node: dict, root: dict) -> tuple[dict, str | None]:
    """NODE with its $ref followed (siblings such as description win), and the name of the $def."""
    ref = node.get("$ref")
    if not ref or not ref.startswith("#/$defs/"):
        return node, None
    name = ref.rsplit("/", 1)[1]
    target = dict(root["$defs"][name])
    target.update({k: v for k, v in node.items() if k != "$ref"})
    return target, name


def _type(node: dict, root: dict) -> str:
    node, name = _resolve(node, root)
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(_type(alt, root) for alt in node[key])
    t = node.get("type")
    if t == "array":
        return f"list of {_type(node.get('items', {}), root)}"
    if t == "object" and name is None and isinstance(node.get("additionalProperties"), dict):
        return f"map of {_type(node['additionalProperties'], root)}"
    if name is not None and t == "object":
        return f"object ({name})"
    if isinstance(t, list):
        return " or ".join(t)
    return t or (name or "any")


def _constraints(node: dict, root: dict) -> str:
    node, _ = _resolve(node, root)
    parts = []
    for key, word in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
        ("minLength", "length ≥"),
        ("maxLength", "length ≤"),
        ("minItems", "items ≥"),
        ("maxItems", "items ≤"),
    ):
        if key in node:
            parts.append(f"{word} {node[key]}")
    if "pattern" in node:
        parts.append(f"pattern `{node['pattern']}`")
    return ", ".join(parts)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def rows(node: dict, root: dict, path: str, required: bool, seen: tuple[str, ...] = ()) -> list[tuple]:
    """(path, type, required, default, constraints, description) of NODE and every field below it."""
    resolved, name = _resolve(node, root)
    if name in seen:
        return []
    seen = (*seen, name) if name else seen
    out = []
    if path:
        default = json.dumps(resolved["default"]) if "default" in resolved else ""
        out.append(
            (
                path,
                _type(node, root),
                "yes" if required else "",
                default,
                _constraints(node, root),
                resolved.get("description", ""),
            )
        )
    if resolved.get("type") == "array" and isinstance(resolved.get("items"), dict):
        items, item_name = _resolve(resolved["items"], root)
        if items.get("type") == "object" and item_name not in seen:
            out += _object_rows(items, root, f"{path}[]", (*seen, item_name) if item_name else seen)
        return out
    if resolved.get("type") == "object" or "properties" in resolved:
        out += _object_rows(resolved, root, path, seen)
    for key in ("oneOf", "anyOf"):
        for alt in resolved.get(key, []):
            alt_resolved, _ = _resolve(alt, root)
            if "properties" in alt_resolved:
                out += _object_rows(alt_resolved, root, path, seen)
    return out


def _object_rows(node: dict, root: dict, path: str, seen: tuple[str, ...]) -> list[tuple]:
    out = []
    required = set(node.get("required", []))
    for key, child in node.get("properties", {}).items():
        if key == "$schema":
            continue
        out += rows(child, root, f"{path}.{key}" if path else key, key in required, seen)
    extra = node.get("additionalProperties")
    # A map of objects (queueing.tiers: tier name -> policy) has rows for the objects' fields too.
    if isinstance(extra, dict) and (node.get("properties") or "properties" in _resolve(extra, root)[0]):
        out += rows(extra, root, f"{path}.<name>", False, seen)
    return out


def render() -> str:
    root = _schema()
    tenant, _ = _resolve({"$ref": "#/$defs/tenant"}, root)
    head = [
        "# Spec field reference",
        "",
        "<!-- Generated by `python -m gpupool.spec.reference` from schemas/gpupool.schema.json; do not edit. -->",
        "",
        "Every field of a stack's spec (`spec.yaml`) and of a tenant file, with its type, constraints, default",
        "and meaning, as the JSON Schema defines them. What the schema cannot express (MIG placement, quotas",
        "against capacity, isolation between tiers, ...) is checked by the rules in [rules.md](rules.md).",
        "",
    ]

    def table(title: str, found: list[tuple]) -> list[str]:
        lines = [f"## {title}", "", "| field | type | required | default | constraints | description |"]
        lines.append("|---|---|---|---|---|---|")
        for r in found:
            lines.append("| " + " | ".join([f"`{r[0]}`", *(_cell(c) for c in r[1:])]) + " |")
        return [*lines, ""]

    spec_rows = _object_rows(root, root, "", ())
    tenant_rows = _object_rows(tenant, root, "", ())
    body = table("The spec (spec.yaml)", spec_rows)
    body += table("A tenant file (tenants/NAME.yaml, or an item of `tenants`)", tenant_rows)
    return "\n".join(head + body).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpupool.spec.reference", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--check", action="store_true", help="exit 1 when docs/reference/spec-reference.md is stale, write nothing"
    )
    ap.add_argument(
        "--output", type=Path, default=DOCS_PATH, help="where to write (default: docs/reference/spec-reference.md)"
    )
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale; run: python -m gpupool.spec.reference", file=sys.stderr)
            return 1
        return 0
    from gpupool import safe_write

    try:  # as every gpupool command writes: no link followed, only a regular file replaced
        safe_write.write_output(args.output, text)
    except safe_write.Refused as exc:
        print(f"error: {exc}; nothing was written", file=sys.stderr)
        return 1
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
