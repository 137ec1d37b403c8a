"""`gpupool tenant new NAME --tier T --gpus RES=N...`: scaffold a tenant file, the first step of onboarding.

The file goes into the stack's tenant directory (the first `tenantFiles` entry that is a directory or a glob
in one), with the editor's schema modeline and placeholder owners and cost centre that rule GP590 rejects, so
the onboarding pull request cannot merge until someone fills them in. An existing file or tenant of that name
is never overwritten. Then the whole stack is validated with the new tenant in it.

Exit status: 0 = written, and the only problems left are the placeholders; 1 = written, and the stack has
other problems with it (e.g. the quota does not fit: the output says which); 2 = usage error, nothing written.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RESOURCE = re.compile(r"^nvidia\.com/[A-Za-z0-9][-A-Za-z0-9_.+]*$")
_MIG_PROFILE = re.compile(r"^\d+g\.\d+gb")
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
        description="Write TENANT_DIR/NAME.yaml (schema modeline, tier, GPU quota, and placeholder owners and "
        "cost centre that fail validation (GP590) until they are filled in), never overwriting a file "
        "or an existing tenant; then validate the whole stack with it and print the next steps. "
        "Exit 0 = written and only the placeholders are left, 1 = written but the stack has other "
        "problems with it, 2 = usage error (nothing written).",
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
        "--stack",
        metavar="NAME",
        help="read the spec path from gpupool:spec in the Pulumi stack's settings (stacks/Pulumi.NAME.yaml)",
    )
    new.set_defaults(func=cmd_new, extend="positional")


def _resource(short: str) -> str:
    if "/" in short:
        return short
    if _MIG_PROFILE.match(short):
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
        if not _RESOURCE.match(name):
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

    if not isinstance(entries, list):
        return None
    base = spec_file.parent
    for entry in entries:
        if not isinstance(entry, str) or not entry or "\0" in entry:
            continue
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


def render_tenant(name: str, tier: str, gpus: dict[str, int], modeline: str) -> str:
    from gpupool.rules.placeholders import COST_CENTER_PLACEHOLDER, OWNER_PLACEHOLDER

    lines = [
        modeline,
        "# Scaffolded by `gpupool tenant new`: fill in owners and costCenter (validation fails until you do),",
        '# then open the onboarding pull request. Fields: README.md, "The spec".',
        f"name: {name}",
        f"tier: {tier}",
    ]
    if gpus:
        lines.append("gpus:")
        lines += [f"  {res}: {n}" for res, n in gpus.items()]
    lines += [
        f"owners: [{OWNER_PLACEHOLDER}]      # the groups bound to the tenant's workload role",
        f"costCenter: {COST_CENTER_PLACEHOLDER}  # the chargeback cost centre (a label value)",
        "",
    ]
    return "\n".join(lines)


def cmd_new(args) -> int:
    from gpupool.cli.common import UsageError, spec_path
    from gpupool.rules.engine import validate_file
    from gpupool.rules.placeholders import RULE_ID as PLACEHOLDER_RULE
    from gpupool.spec.diagnostics import did_you_mean
    from gpupool.spec.loader import STDIN, load_spec

    if len(args.positional) > 2:
        raise UsageError("give NAME and at most one SPEC")
    name, args.spec = args.positional[0], (args.positional[1:] or [None])[0]
    if len(name) > 63 or not _DNS_LABEL.match(name):
        raise UsageError(
            f"{name!r} is not a tenant name: lower-case letters, digits and '-', at most 63 characters, "
            "starting and ending with a letter or digit (it is also the namespace)"
        )
    last = args.gpus[-1] if args.gpus else ""
    if args.spec is None and "=" not in last and (last.endswith((".yaml", ".yml")) or "/" in last or last == "-"):
        args.spec = args.gpus.pop()  # `--gpus a=1 b=2 SPEC`: nargs="+" took the spec path too
    gpus = parse_gpus(args.gpus)
    path = spec_path(args)
    if path == STDIN:
        raise UsageError("tenant new writes into the spec's tenant directory: give the spec file, not `-`")
    spec_file = Path(path)
    loaded = load_spec(spec_file)
    data = loaded.data if isinstance(loaded.data, dict) else None
    if data is None:
        raise UsageError(f"{path}: cannot be read as a spec; run `gpupool validate {path}`")
    tiers: list[str] = [
        t["name"] for t in data.get("tiers") or [] if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]
    if args.tier not in tiers:
        raise UsageError(
            f"{path} has no tier {args.tier!r}{did_you_mean(args.tier, tiers)}; tiers: {', '.join(tiers) or '(none)'}"
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
    target = target_dir / f"{name}.yaml"
    text = render_tenant(name, args.tier, gpus, _modeline(spec_file, target_dir))
    try:
        with open(target, "x", encoding="utf-8") as f:  # "x": never overwrite, even in a race
            f.write(text)
    except FileExistsError:
        raise UsageError(f"{target} already exists; gpupool does not overwrite it") from None
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
    print(f"created {target}")

    result = validate_file(spec_file)
    diagnostics = result.report.sorted()
    for d in diagnostics:
        print(d.render(), file=sys.stderr)
    others = [d for d in diagnostics if d.is_error and d.rule != PLACEHOLDER_RULE]
    if not any(Path(d.location.file).name == target.name for d in diagnostics if d.rule == PLACEHOLDER_RULE):
        # the placeholders were not reported, so the new file was not read (tenantFiles does not name it)
        print(f"warning: {path} did not read {target}; check its tenantFiles", file=sys.stderr)
    print("\nnext steps:")
    print(f"  1. edit {target}: set owners (the groups that run workloads there) and costCenter")
    print(f"  2. gpupool validate {path}")
    print(f"  3. gpupool diff --base origin/main {path}    # what the onboarding pull request changes")
    print(f"  4. git add {target} and open the pull request")
    if others:
        from gpupool.present.text import plural

        print(
            f"\n{path}: {plural(len(others), 'other error')} with {name} added (above); fix "
            f"{'it' if len(others) == 1 else 'them'} or change the quota before the pull request",
            file=sys.stderr,
        )
        return 1
    return 0
