"""`gpupool tenant new NAME --tier T --gpus RES=N...`: scaffold a tenant file, the first step of onboarding.

The file goes into the stack's tenant directory (the first `tenantFiles` entry the loader would read that is
a directory or a glob in one; never an entry it refuses, GP805), with the editor's schema modeline and the
owners and cost centre given, or placeholders that rule GP590 rejects, so the onboarding pull request cannot
merge until someone fills them in. The whole stack is validated with the new tenant in it *before* anything
is written, and the file is written only when the tenant adds no error but the placeholders: a quota no pool
offers, an isolation the tier refuses or a quota beyond capacity (blamed on the new tenant) writes nothing.
The file is created through gpupool.safe_write: no link followed from the stack directory down, never over
an existing file.

Exit status: 0 = written, and the only problems the tenant brings are the placeholders; 1 = nothing written:
the tenant would add errors (the output says which, located in the file it would have written) or the path
is refused (a symbolic link on the way, say); 2 = usage error, nothing written.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from pathlib import Path

# Checked with fullmatch: `$` would let a trailing newline through (a file named "x\n.yaml").
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_RESOURCE = re.compile(r"nvidia\.com/[A-Za-z0-9][-A-Za-z0-9_.+]*")
_MIG_PROFILE = re.compile(r"\d+g\.\d+gb.*")
_PLAIN = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_.@:]*")  # written as is; anything else as a quoted YAML string
_MODELINE = re.compile(r"#\s*yaml-language-server:\s*\$schema=(?P<url>\S+)")
_MAX_DIGITS = 9  # a quota of a billion GPUs is not a quota


def register(sub) -> None:
    tenant = sub.add_parser(
        "tenant", help="tenant onboarding: scaffold a tenant file", description="Tenant onboarding helpers."
    )
    tsub = tenant.add_subparsers(dest="tenant_command", metavar="SUBCOMMAND")
    tsub.required = True
    new = tsub.add_parser(
        "new",
        help="write a new tenant file into the stack's tenant directory and validate the stack with it",
        usage="gpupool tenant new NAME --tier TIER [--gpus RES=N ...] [--owner GROUP ...] "
        "[--cost-center ID] [-o text|json] [--stack NAME | SPEC]",
        description="Validate the whole stack with a new tenant NAME in it, then write TENANT_DIR/NAME.yaml "
        "(schema modeline, tier, GPU quota, owners and cost centre; placeholders that fail validation (GP590) "
        "until they are filled in for the ones not given), never overwriting a file or an existing tenant, "
        "and print the next steps. Exit 0 = written and only the placeholders are left, 1 = nothing "
        "written: the tenant would add errors (shown, located in the file it would write) or the path is "
        "refused, 2 = usage error (nothing written).",
    )
    # NAME and SPEC in one positional: argparse cannot fill an optional second positional given after options
    new.add_argument(
        "positional",
        nargs="+",
        metavar="NAME [SPEC]",
        help="tenant name, also its namespace (a DNS label: team-vision); then the stack spec "
        "(default: --stack's gpupool:spec, else $GPUPOOL_SPEC, else ./spec.yaml)",
    )
    new.add_argument("--tier", required=True, metavar="TIER", help="one of the spec's tiers")
    new.add_argument(
        "--gpus",
        nargs="+",
        action="extend",
        default=[],
        metavar="RES=N",
        help="GPU quota: nvidia.com/gpu=2, nvidia.com/mig-1g.10gb=4, or the short forms gpu=2, "
        "gpu.shared=8, 1g.10gb=4 (MIG profiles)",
    )
    new.add_argument(
        "--owner",
        action="append",
        default=[],
        metavar="GROUP",
        help="a group that owns the tenant (bound to its workload role); repeat for more. Default: a placeholder",
    )
    new.add_argument(
        "--cost-center",
        metavar="ID",
        help="the chargeback cost centre (a label value such as cc-4100). Default: a placeholder",
    )
    new.add_argument(
        "--stack",
        metavar="NAME",
        help="read the spec path from gpupool:spec in the Pulumi stack's settings (stacks/Pulumi.NAME.yaml)",
    )
    from gpupool.cli.common import add_output_format

    add_output_format(
        new, ("text", "json"), "text", help="text (default) or json: what was written, the problems and next steps"
    )
    new.set_defaults(func=cmd_new, extend="positional")


def _resource(short: str) -> str:
    if "/" in short:
        return short
    if _MIG_PROFILE.fullmatch(short):
        return "nvidia.com/mig-" + short.replace("+", ".")
    return "nvidia.com/" + short


def parse_gpus(items: list[str]) -> dict[str, int]:
    from gpupool.cli.common import UsageError

    out: dict[str, int] = {}
    for item in items:
        res, sep, count = item.partition("=")
        res, count = res.strip(), count.strip()
        if not sep or not res:
            raise UsageError(f"--gpus takes RES=N (such as nvidia.com/gpu=2), got {item!r}")
        name = _resource(res)
        if not _RESOURCE.fullmatch(name):
            raise UsageError(
                f"{res!r} is not a GPU resource name; use nvidia.com/gpu, nvidia.com/gpu.shared or "
                "nvidia.com/mig-<profile> (or gpu, gpu.shared, 1g.10gb)"
            )
        if not count.isdigit() or not count.isascii() or len(count.lstrip("0")) > _MAX_DIGITS:
            raise UsageError(f"the count in {item!r} must be a whole number of at most {_MAX_DIGITS} digits")
        if name in out:
            raise UsageError(f"{name} is given twice")
        out[name] = int(count)
    return out


def tenant_dir(spec_file: Path, entries: object) -> Path | None:
    """Where a new tenant file goes: the first tenantFiles entry that is a directory, or the directory part of
    the first glob entry that a NAME.yaml file would match."""
    import fnmatch

    from gpupool.spec.tenant_paths import escapes

    if not isinstance(entries, list):
        return None
    base = spec_file.parent
    for entry in entries:
        if not isinstance(entry, str) or not entry or "\0" in entry or escapes(entry):
            continue  # the loader refuses to read there (GP805), so it is no place to write
        if (base / entry).is_dir():
            return base / entry
        if any(ch in entry for ch in "*?[") and not Path(entry).is_absolute():
            head, _, pattern = entry.rpartition("/")
            if not any(ch in head for ch in "*?[") and fnmatch.fnmatch("x.yaml", pattern):
                return base / head if head else base
    return None


def _modeline(spec_file: Path, target_dir: Path) -> str:
    """The spec's own modeline, pointed at tenant.schema.json beside gpupool.schema.json; else the schema
    this gpupool validates with."""
    from gpupool.spec.schema import SCHEMA_DIR

    schema = SCHEMA_DIR / "tenant.schema.json"
    try:
        first = spec_file.read_text(encoding="utf-8").splitlines()[:3]
    except (OSError, UnicodeDecodeError):
        first = []
    for line in first:
        m = _MODELINE.search(line)
        if m and "://" not in m["url"]:
            schema = (spec_file.parent / m["url"]).parent / "tenant.schema.json"
            break
        if m:  # a URL: use the tenant schema beside it
            return f"# yaml-language-server: $schema={m['url'].rsplit('/', 1)[0]}/tenant.schema.json"
    return f"# yaml-language-server: $schema={Path(os.path.relpath(schema.resolve(), target_dir.resolve())).as_posix()}"


def _scalar(text: str) -> str:
    """TEXT as a YAML scalar: plain when that reads back as the same string, else double-quoted (JSON's
    escapes are YAML's), so no value given on the command line can add a line or a key."""
    import json

    plain = _PLAIN.fullmatch(text) and text.lower() not in ("null", "true", "false", "yes", "no", "on", "off", "~")
    return text if plain and not text.replace(".", "").isdigit() else json.dumps(text)


def render_tenant(
    name: str,
    tier: str,
    gpus: dict[str, int],
    modeline: str,
    owners: list[str] | None = None,
    cost_center: str | None = None,
) -> str:
    from gpupool.rules.placeholders import COST_CENTER_PLACEHOLDER, OWNER_PLACEHOLDER

    todo = [w for w, given in (("owners", owners), ("costCenter", cost_center)) if not given]
    lines = [
        modeline,
        f"# Scaffolded by `gpupool tenant new`: fill in {' and '.join(todo)} (validation fails until you do),"
        if todo
        else "# Scaffolded by `gpupool tenant new`.",
        "# Then open the onboarding pull request. Every field: gpupool's docs/reference/spec-reference.md.",
        f"name: {name}",
        f"tier: {_scalar(tier)}",
    ]
    if gpus:
        lines.append("gpus:")
        lines += [f"  {res}: {n}" for res, n in gpus.items()]
    shown = ", ".join(_scalar(o) for o in owners or [OWNER_PLACEHOLDER])
    lines += [
        f"owners: [{shown}]      # the groups bound to the tenant's workload role",
        f"costCenter: {_scalar(cost_center or COST_CENTER_PLACEHOLDER)}  # the chargeback cost centre (a label value)",
        "",
    ]
    return "\n".join(lines)


def _write_tenant(stack_dir: Path, rel: Path, text: str) -> None:
    """Create STACK_DIR/REL through gpupool.safe_write: no link followed from the stack directory down, never
    over an existing file. UsageError when the file exists, CommandError when the path is refused (a link on
    the way, say): nothing is written either way."""
    from gpupool import safe_write
    from gpupool.cli.common import CommandError, UsageError

    try:
        with safe_write.Directory.open(stack_dir) as d:
            d.create(rel.as_posix(), text)
    except safe_write.Refused as exc:
        if exc.reason == safe_write.reason(FileExistsError(errno.EEXIST, "")):
            raise UsageError(f"{exc.path} already exists; gpupool does not overwrite it") from None
        raise CommandError(f"{exc}; nothing was written") from None


def _judge(spec_file: Path, label: str, text: str, name: str):
    """(the stack validated without the new tenant, the stack validated with it): the new file is spliced in
    as the loader would read it, under LABEL, before anything is written."""
    from gpupool.rules.engine import validate_file, validate_loaded
    from gpupool.spec.loader import load_spec, load_yaml_file

    before = validate_file(spec_file)
    loaded = load_spec(spec_file)
    if isinstance(loaded.data, dict):
        tenants = loaded.data.setdefault("tenants", [])
        if isinstance(tenants, list):
            ok, tenant = load_yaml_file(
                Path(label), label, loaded.source, loaded.report, ("tenants", len(tenants)), raw=text.encode()
            )
            if ok:
                tenants.append(tenant)
    return before, validate_loaded(loaded, changed=frozenset({name}))


def _key(d) -> tuple:
    return (d.rule, d.severity, d.location.file, d.path, d.message)


def _name_and_spec(args) -> str:
    """NAME from the positionals, checked as a DNS label (it is also the namespace); sets args.spec from
    them, or from the end of --gpus."""
    from gpupool.cli.common import UsageError

    if len(args.positional) > 2:
        raise UsageError("give NAME and at most one SPEC")
    name, args.spec = args.positional[0], (args.positional[1:] or [None])[0]
    if len(name) > 63 or not _DNS_LABEL.fullmatch(name):
        raise UsageError(
            f"{name!r} is not a tenant name: lower-case letters, digits and '-', at most 63 characters, "
            "starting and ending with a letter or digit (it is also the namespace)"
        )
    last = args.gpus[-1] if args.gpus else ""
    if args.spec is None and "=" not in last and (last.endswith((".yaml", ".yml")) or "/" in last or last == "-"):
        args.spec = args.gpus.pop()  # `--gpus a=1 b=2 SPEC`: nargs="+" took the spec path too
    return name


def _spec_file(args) -> tuple[str, Path]:
    """(the spec path as given, the spec file); not `-`: the new file goes into the spec's tenant directory."""
    from gpupool.cli.common import UsageError, spec_path
    from gpupool.spec.loader import STDIN

    path = spec_path(args)
    if path == STDIN:
        raise UsageError("tenant new writes into the spec's tenant directory: give the spec file, not `-`")
    return path, Path(path)


def _target_dir(spec_file: Path, path: str, name: str, tier: str) -> Path:
    """The tenant directory the new file goes into, once the stack is known to take a tenant NAME in TIER."""
    from gpupool.cli.common import UsageError
    from gpupool.spec.diagnostics import did_you_mean
    from gpupool.spec.loader import load_spec

    loaded = load_spec(spec_file)
    data = loaded.data if isinstance(loaded.data, dict) else None
    if data is None:
        raise UsageError(f"{path}: cannot be read as a spec; run `gpupool validate {path}`")
    tiers: list[str] = [
        t["name"] for t in data.get("tiers") or [] if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]
    if tier not in tiers:
        raise UsageError(
            f"{path} has no tier {tier!r}{did_you_mean(tier, tiers)}; tiers: {', '.join(tiers) or '(none)'}"
        )
    existing = [t.get("name") for t in data.get("tenants") or [] if isinstance(t, dict)]
    if name in existing:
        raise UsageError(f"{path} already has a tenant {name!r}; edit its file instead")
    target_dir = tenant_dir(spec_file, data.get("tenantFiles"))
    if target_dir is None:
        raise UsageError(
            f"{path} has no tenant directory: add `tenantFiles: [tenants/]` to it (and create the "
            "directory) so that each tenant is its own file"
        )
    return target_dir


def _notes_after_writing(spec_file: Path, path: str, target: Path, name: str, before) -> list[tuple[str, str]]:
    """(warning or note, message) pairs about the stack once the file is written."""
    from gpupool.spec.loader import load_spec

    notes: list[tuple[str, str]] = []
    if not any(
        t.get("name") == name for t in (load_spec(spec_file).data or {}).get("tenants") or [] if isinstance(t, dict)
    ):
        # tenant_dir chose a directory the loader does not read after all: say so rather than pretend
        notes.append(("warning", f"{path} did not read {target}; check its tenantFiles"))
    if before.report.errors:
        from gpupool.present.text import plural

        notes.append(
            (
                "note",
                f"{path} already had {plural(len(before.report.errors), 'error')} without {name}; "
                f"`gpupool validate {path}` shows them",
            )
        )
    return notes


def cmd_new(args) -> int:
    from gpupool.rules.placeholders import RULE_ID as PLACEHOLDER_RULE

    name = _name_and_spec(args)
    gpus = parse_gpus(args.gpus)
    path, spec_file = _spec_file(args)
    target_dir = _target_dir(spec_file, path, name, args.tier)
    target = target_dir / f"{name}.yaml"
    text = render_tenant(name, args.tier, gpus, _modeline(spec_file, target_dir), args.owner, args.cost_center)

    before, after = _judge(spec_file, str(target), text, name)
    known = {_key(d) for d in before.report.sorted()}
    diagnostics = after.report.sorted()
    added = [d for d in diagnostics if _key(d) not in known]
    as_json = args.output == "json"
    if not as_json:
        for d in added:
            print(d.render(), file=sys.stderr)
    blocking = [d for d in added if d.is_error and not (d.rule == PLACEHOLDER_RULE and d.location.file == str(target))]
    if blocking:
        from gpupool.present.text import plural

        if as_json:
            _print_json(name, path, None, added, [], [])
        print(
            f"{target}: not written: {plural(len(blocking), 'error')} with {name} added (above); change the "
            "quota, tier, owners or cost centre and run tenant new again",
            file=sys.stderr,
        )
        return 1
    _write_tenant(spec_file.parent, target.relative_to(spec_file.parent), text)
    notes = _notes_after_writing(spec_file, path, target, name, before)
    steps = next_steps(target, path, args.owner, args.cost_center)
    if as_json:
        _print_json(name, path, target, added, notes, steps)
        return 0
    print(f"created {target}")
    for kind, message in notes:
        print(f"{kind}: {message}", file=sys.stderr)
    print("\nnext steps:")
    for i, step in enumerate(steps, 1):
        print(f"  {i}. {step}")
    return 0


def next_steps(target: Path, path: str, owners: list[str], cost_center: str | None) -> list[str]:
    """What the onboarding pull request still needs, in order (text and json show the same list)."""
    todo = [
        w
        for w, given in (("owners (the groups that run workloads there)", owners), ("costCenter", cost_center))
        if not given
    ]
    steps = [f"edit {target}: set {' and '.join(todo)}"] if todo else []
    return steps + [
        f"gpupool validate {path}",
        f"gpupool diff --base origin/main {path}    # what the onboarding pull request changes",
        f"git add {target} and open the pull request",
    ]


def _print_json(
    name: str, spec: str, created: Path | None, diagnostics, notes: list[tuple[str, str]], steps: list[str]
):
    import json

    from gpupool.present.diagnostics import diagnostic_json

    doc = {
        "tenant": name,
        "spec": spec,
        "created": None if created is None else str(created),
        "diagnostics": [diagnostic_json(d) for d in diagnostics],
        "notes": [{"severity": kind, "message": message} for kind, message in notes],
        "nextSteps": steps,
    }
    print(json.dumps(doc, indent=2))
