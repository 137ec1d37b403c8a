"""Per-run stack settings (`gpupool stacks -c KEY=VALUE`) that never rewrite the committed stack file.

`pulumi config set` (the Automation API's set_all_config) writes into Pulumi.<stack>.yaml, which the team
commits. For one run, gpupool instead copies the stack file with the run's values merged in into a private
temporary directory and hands pulumi that copy with `--config-file` (the Automation API's `config_file`
option of preview, up and destroy: pulumi/automation/_stack.py, `extra_args.extend(["--config-file",
config_file])`). The committed file is only read; a run killed at any moment leaves it as it was (at
worst a temporary copy outside the repository).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import yaml

from gpupool import safe_write

EXTENSIONS = (".yaml", ".yml", ".json")  # as the Automation API's _setting_extensions


def project_name(project_dir: Path) -> str:
    data = yaml.safe_load((project_dir / "Pulumi.yaml").read_text(encoding="utf-8")) or {}
    return str(data.get("name") or "") if isinstance(data, dict) else ""


def stack_file(project_dir: Path, stack: str) -> Path:
    """Where pulumi keeps STACK's settings: Pulumi.<stack>.yaml in the project's stackConfigDir (the last
    component of an org/project/stack name, as the Automation API's get_stack_settings_name)."""
    data = yaml.safe_load((project_dir / "Pulumi.yaml").read_text(encoding="utf-8")) or {}
    config_dir = data.get("stackConfigDir") if isinstance(data, dict) else None
    base = project_dir / str(config_dir) if config_dir else project_dir
    short = stack.split("/")[-1]
    for ext in EXTENSIONS:
        if (base / f"Pulumi.{short}{ext}").is_file():
            return base / f"Pulumi.{short}{ext}"
    return base / f"Pulumi.{short}.yaml"


def full_key(key: str, project: str) -> str:
    """KEY as `pulumi config set` stores it: a key without a namespace is in the project's."""
    return key if ":" in key else f"{project}:{key}"


def merged(settings_text: str, values: Mapping[str, str], project: str) -> dict:
    """The stack settings of SETTINGS_TEXT (YAML or JSON) with VALUES set as plain strings, as
    `pulumi config set KEY VALUE` would set them; everything else (the secrets provider, its salt or key,
    encrypted values) is kept as it is."""
    data = yaml.safe_load(settings_text) if settings_text.strip() else {}
    if not isinstance(data, dict):
        raise ValueError("the stack file is not a mapping")
    config = data.get("config") or {}
    if not isinstance(config, dict):
        raise ValueError("the stack file's config is not a mapping")
    config = dict(config)
    for key, value in values.items():
        config[full_key(key, project)] = value
    return {**data, "config": config}


@contextlib.contextmanager
def overlay(project_dir: Path, stack: str, values: Mapping[str, str]) -> Iterator[str | None]:
    """A `--config-file` for one run of STACK: its stack file with VALUES merged in, in a private temporary
    directory removed afterwards; None (pulumi's own file) when there are no VALUES."""
    if not values:
        yield None
        return
    source = stack_file(project_dir, stack)
    text = source.read_text(encoding="utf-8") if source.is_file() else ""
    data = merged(text, values, project_name(project_dir))
    tmp = tempfile.mkdtemp(prefix="gpupool-run-config-")  # mode 0700: the values may be credentials
    try:
        name = f"Pulumi.{stack.split('/')[-1]}.yaml"
        with safe_write.Directory.open(tmp) as d:  # the one writer; the directory is private (0700)
            d.write_new(name, yaml.safe_dump(data, sort_keys=False))
        yield os.path.join(tmp, name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def connection(config: Mapping[str, tuple[str, bool]], project_dir: Path) -> tuple[str | None, str | None]:
    """The kubeconfig and context the program is given under CONFIG (gpupool.deploy.stack_inputs.run_config:
    the stack file's values, then this run's -c values), None where unset. A relative kubeconfig path is the
    project's: the program runs there."""
    from gpupool.spec.stack import CONFIG_NAMESPACE

    def value(key: str) -> str | None:
        got = config.get(f"{CONFIG_NAMESPACE}:{key}")
        return got[0] if got and got[0] else None

    kubeconfig = value("kubeconfig")
    if kubeconfig and "\n" not in kubeconfig and not kubeconfig.lstrip().startswith(("{", "~", "/")):
        kubeconfig = str(project_dir / kubeconfig)
    return kubeconfig, value("context")
