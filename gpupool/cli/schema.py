"""`gpupool schema`: print the JSON Schema of the spec (for editors and other tools)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of the spec")
    p.add_argument("--tenant", action="store_true", help="print the schema of one tenant file instead")
    p.set_defaults(func=run)


def run(args) -> int:
    from gpupool.spec.schema import SCHEMA_DIR

    name = "tenant.schema.json" if args.tenant else "gpupool.schema.json"
    print((SCHEMA_DIR / name).read_text(), end="")
    return 0
