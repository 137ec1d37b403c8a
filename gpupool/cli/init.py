"""`gpupool init DIR`: scaffold a platform team's own repository (gpupool/scaffold.py has the files).

DIR must not exist, be empty, or hold only `.git` (a freshly cloned empty repository); every file is created through gpupool.safe_write (no link followed, never
over an existing file), then the new stack is validated and the next steps printed.
Exit status: 0 = written and valid, 1 = a path was refused, 2 = usage error (DIR not empty).
Nothing is written into .git: no scaffolded file is under it.
"""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "init",
        help="scaffold a team repository: Pulumi project, a stack with a spec and one tenant, CI workflow",
        description="Write a new gpupool repository into DIR (which must not exist, be empty or hold only .git, as a "
        "freshly cloned empty repository does): Pulumi.yaml "
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
    from gpupool.cli.common import CommandError, UsageError
    from gpupool.spec.diagnostics import printable

    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", args.stack) or len(args.stack) > 40:
        raise UsageError("--stack: must be a lowercase DNS label such as dev or prod")
    target = Path(args.directory)
    if os.path.lexists(target) and not _new_or_fresh(target):
        raise UsageError(
            f"{printable(str(target))}: exists and is not an empty directory (nor a fresh clone holding only .git); "
            "gpupool init writes only into a new one"
        )
    project = scaffold.project_name(target.resolve().name)
    content = scaffold.files(project, version(), args.stack, installed_from())
    try:
        with safe_write.Directory.open(target, create=True) as d:
            for rel, text in content.items():
                d.create(rel, text, make_parents=True)
    except safe_write.Refused as exc:
        raise CommandError(f"{exc}; stopped") from None
    print(f"wrote {len(content)} files to {target}/")
    from gpupool.rules.engine import validate_file

    spec = target / "stacks" / args.stack / "spec.yaml"
    result = validate_file(str(spec))
    for diagnostic in result.report.sorted():
        print(diagnostic.render(), file=sys.stderr)
    if result.spec is None:
        return 1
    if "\n./vendor/" in content["requirements.txt"]:
        print(
            "requirements.txt names a vendored wheel: copy the wheel gpupool was installed from into vendor/ "
            "(or change the requirement: its comment says how)"
        )
    print(
        f"next: cd {target} && python3 -m venv .venv && .venv/bin/pip install -r requirements.txt; "
        f"edit {spec.relative_to(target)} "
        f"(your nodes), then gpupool validate {spec.relative_to(target)} and gpupool stacks preview {args.stack}"
    )
    return 0


def installed_from() -> dict | None:
    """The running gpupool's direct_url.json (PEP 610: how pip installed it from a URL, a file or a clone),
    or None when there is none (installed from a package index), it does not read as a JSON object, or no
    installed distribution holds this very package (a source tree on sys.path)."""
    import json
    from importlib import metadata
    from pathlib import Path

    import gpupool

    here = Path(gpupool.__file__).resolve()
    try:
        for dist in metadata.distributions(name="gpupool"):
            if Path(str(dist.locate_file("gpupool/__init__.py"))).resolve() == here:
                text = dist.read_text("direct_url.json")
                data = json.loads(text) if text else None
                return data if isinstance(data, dict) else None
    except (OSError, ValueError, UnicodeDecodeError):
        pass
    return None


def _new_or_fresh(target) -> bool:
    """TARGET (which exists) is a directory, not a link, that is empty or holds only `.git`: a freshly cloned
    empty repository (`.git` a directory, or a gitfile as `git clone --separate-git-dir` and worktrees write
    it). No scaffold file is under .git/, so nothing is ever written into it."""
    import os
    import stat

    try:
        if not stat.S_ISDIR(os.lstat(target).st_mode):
            return False
        entries = os.listdir(target)
    except OSError:
        return False
    if not entries:
        return True
    if entries != [".git"]:
        return False
    try:
        mode = os.lstat(os.path.join(target, ".git")).st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) or stat.S_ISREG(mode)  # a link named .git is no clone's
