"""`gpupool init DIR`: scaffold a platform team's own repository (gpupool/scaffold.py has the files).

DIR must not exist or be empty; every file is created through gpupool.safe_write (no link followed, never
over an existing file), then the new stack is validated and the next steps printed.
Exit status: 0 = written and valid, 1 = a path was refused, 2 = usage error (DIR not empty).
"""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "init",
        help="scaffold a team repository: Pulumi project, a stack with a spec and one tenant, CI workflow",
        description="Write a new gpupool repository into DIR (which must not exist or be empty): Pulumi.yaml "
        "and __main__.py (gpupool.pulumi.GpuPlatform), requirements.txt, stacks/Pulumi.STACK.yaml, "
        "stacks/STACK/spec.yaml with one tenant, the schemas, .github/workflows/gpupool.yml and a README.",
    )
    p.add_argument("directory", metavar="DIR", help="the new repository's directory")
    p.add_argument("--stack", default="dev", metavar="NAME", help="the first stack's name (default: dev)")
    p.set_defaults(func=run)


def run(args) -> int:
    import os
    import re
    import sys
    from pathlib import Path

    from gpupool import safe_write, scaffold, version
    from gpupool.cli.common import UsageError

    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", args.stack) or len(args.stack) > 40:
        raise UsageError("--stack: must be a lowercase DNS label such as dev or prod")
    target = Path(args.directory)
    if os.path.lexists(target) and (not target.is_dir() or target.is_symlink() or any(target.iterdir())):
        raise UsageError(f"{target}: exists and is not an empty directory; gpupool init writes only into a new one")
    project = scaffold.project_name(target.resolve().name)
    content = scaffold.files(project, version(), args.stack)
    try:
        with safe_write.Directory.open(target, create=True) as d:
            for rel, text in content.items():
                d.create(rel, text, make_parents=True)
    except safe_write.Refused as exc:
        print(f"gpupool init: error: {exc}; stopped", file=sys.stderr)
        return 1
    print(f"wrote {len(content)} files to {target}/")
    from gpupool.rules.engine import validate_file

    spec = target / "stacks" / args.stack / "spec.yaml"
    result = validate_file(str(spec))
    for diagnostic in result.report.sorted():
        print(diagnostic.render(), file=sys.stderr)
    if result.spec is None:
        return 1
    print(
        f"next: cd {target} && python3 -m venv .venv && pulumi install; edit {spec.relative_to(target)} "
        f"(your nodes), then gpupool validate {spec.relative_to(target)} and gpupool stacks preview {args.stack}"
    )
    return 0
