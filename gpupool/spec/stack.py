"""Which spec a command reads: SPEC, `--stack NAME` (Pulumi's stack settings), $GPUPOOL_SPEC or ./spec.yaml.

`--stack dev` reads `gpupool:spec` from `<stackConfigDir>/Pulumi.dev.yaml`, where the Pulumi project
(`Pulumi.yaml`, found in the current directory or above it, as `pulumi` finds it) names stackConfigDir.
The value is relative to the project directory, which is where `pulumi up` runs the program from, so the
CLI and `pulumi up` read the same file.

The key is in gpupool's namespace whatever the project is called: the programs read
`pulumi.Config(CONFIG_NAMESPACE)` (components/program.py, GpuPlatformArgs.from_config), not
`pulumi.Config()`, which is the project's namespace (pulumi/config.py: `Config(name=None)` takes
`get_project()`). A key written without a namespace in a stack file (`spec:`) is the project's
(`pulumi config set spec X` writes `<project>:spec`), so it is gpupool's only in a project named gpupool.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from gpupool.spec.loader import STDIN

ENV_VAR = "GPUPOOL_SPEC"
DEFAULT_SPEC = "spec.yaml"
CONFIG_NAMESPACE = "gpupool"  # the config namespace every gpupool program reads, whatever the project's name
CONFIG_KEY = "spec"
SPEC_SETTING = f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"  # gpupool:spec


class SpecNotFound(Exception):
    """No usable spec path: a usage error (exit 2)."""


def find_project(start: Path) -> Path | None:
    """The directory holding Pulumi.yaml (or Pulumi.yml), from START upwards."""
    for d in (start, *start.parents):
        for name in ("Pulumi.yaml", "Pulumi.yml"):
            if (d / name).is_file():
                return d / name
    return None


def _read_yaml(path: Path, what: str) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SpecNotFound(f"{path}: cannot read {what} ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise SpecNotFound(f"{path}: {what} is not a YAML mapping")
    return data


def stack_spec(stack: str, cwd: Path | None = None) -> str:
    """The spec path `gpupool:spec` (SPEC_SETTING) of stack STACK, as a path usable from CWD."""
    cwd = cwd or Path.cwd()
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", stack or "") or stack in (".", ".."):
        # Pulumi's own rule for stack names: letters, digits, -, _ and ., at most 100 characters.
        raise SpecNotFound(
            "--stack: give a stack name such as dev (as in `pulumi stack select dev`): letters, digits, "
            "'-', '_' and '.', at most 100 characters"
        )
    project_file = find_project(cwd.resolve())
    if project_file is None:
        raise SpecNotFound(
            f"--stack {stack}: no Pulumi.yaml in {cwd} or above it; run from the Pulumi project, or pass the spec path"
        )
    project = _read_yaml(project_file, "the Pulumi project")
    project_dir = project_file.parent
    name = str(project.get("name") or CONFIG_NAMESPACE)
    config_dir = project_dir / str(project.get("stackConfigDir") or ".")
    stack_file = config_dir / f"Pulumi.{stack}.yaml"
    if not stack_file.is_file():
        known = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in config_dir.glob("Pulumi.*.yaml"))
        raise SpecNotFound(
            f"--stack {stack}: no {_rel(stack_file, cwd)}" + (f"; stacks: {', '.join(known)}" if known else "")
        )
    config = _read_yaml(stack_file, "the stack settings").get("config") or {}
    value = setting(config, name, CONFIG_KEY)
    if not isinstance(value, str) or not value:
        raise SpecNotFound(
            f"{_rel(stack_file, cwd)}: no {SPEC_SETTING} setting (a spec path, such as stacks/{stack}/spec.yaml)"
            + _elsewhere(config, name)
            + f"; set it with `pulumi config set {SPEC_SETTING} PATH --stack {stack}`"
        )
    return _rel(project_dir / value, cwd)


def setting(config: object, project: str, key: str) -> object:
    """The value of `gpupool:KEY` in a stack file's `config:` mapping, as the program reads it: the
    namespaced key, or the bare KEY when the project itself is named gpupool (Pulumi's rule)."""
    if not isinstance(config, dict):
        return None
    if f"{CONFIG_NAMESPACE}:{key}" in config:
        return config[f"{CONFIG_NAMESPACE}:{key}"]
    return config.get(key) if project == CONFIG_NAMESPACE else None


def _elsewhere(config: object, project: str) -> str:
    """Say so when the spec path is set in the project's namespace, which the program does not read."""
    if not isinstance(config, dict) or project == CONFIG_NAMESPACE:
        return ""
    if CONFIG_KEY in config or f"{project}:{CONFIG_KEY}" in config:
        return (
            f"; the {CONFIG_KEY} setting there is in the Pulumi project's namespace (a key without "
            f"`{CONFIG_NAMESPACE}:` or with the project's name), which the program does not read"
        )
    return ""


def stacks_of(spec: str, cwd: Path | None = None) -> list[str]:
    """The Pulumi stacks of the project whose gpupool:spec is SPEC (the same file)."""
    cwd = cwd or Path.cwd()
    project_file = find_project((cwd / spec).resolve().parent) or find_project(cwd.resolve())
    if project_file is None:
        return []
    try:
        project = _read_yaml(project_file, "the Pulumi project")
    except SpecNotFound:
        return []
    config_dir = project_file.parent / str(project.get("stackConfigDir") or ".")
    name = str(project.get("name") or CONFIG_NAMESPACE)
    target = (cwd / spec).resolve()
    out = []
    for path in sorted(config_dir.glob("Pulumi.*.yaml")):
        try:
            config = _read_yaml(path, "the stack settings").get("config") or {}
        except SpecNotFound:
            continue
        value = setting(config, name, CONFIG_KEY)
        if isinstance(value, str) and value and (project_file.parent / value).resolve() == target:
            out.append(path.name[len("Pulumi.") : -len(".yaml")])
    return out


def _rel(path: Path, cwd: Path) -> str:
    try:
        return os.path.relpath(path, cwd)
    except ValueError:  # another drive (Windows)
        return str(path)


def resolve(spec: str | None, stack: str | None, *, cwd: Path | None = None, must_exist: bool = True) -> str:
    """The spec path a command reads, in order: SPEC, --stack NAME, $GPUPOOL_SPEC, ./spec.yaml.
    `-` (stdin) is returned as is. Raises SpecNotFound (a usage error) when nothing names an existing file."""
    if spec is not None and stack is not None:
        raise SpecNotFound("give a SPEC path or --stack NAME, not both")
    if spec is not None:
        path, how = spec, ""
    elif stack is not None:
        path, how = stack_spec(stack, cwd), f" ({SPEC_SETTING} of stack {stack})"
    elif os.environ.get(ENV_VAR):
        path, how = os.environ[ENV_VAR], f" (from ${ENV_VAR})"
    else:
        path, how = DEFAULT_SPEC, f" (no SPEC given: pass a spec path, --stack NAME, or set ${ENV_VAR})"
    if path == STDIN or not must_exist:
        return path
    full = (cwd / path) if cwd and not Path(path).is_absolute() else Path(path)
    try:
        if full.is_dir():
            raise SpecNotFound(f"{path}: is a directory; give the spec file{how}")
        if not full.is_file():
            raise SpecNotFound(f"{path}: no such file{how}")
    except OSError as exc:  # a name too long for the file system, say
        raise SpecNotFound(f"{path}: cannot be used ({exc.strerror}){how}") from None
    return path
