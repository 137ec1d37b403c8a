"""The project a `gpupool stacks` command runs in: its Pulumi workspace, with the program's virtualenv first on
PATH, and the one-line errors for a project that cannot be run at all."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pulumi import automation as auto

T = TypeVar("T")


class SetupError(Exception):
    """The project cannot be run at all (no Pulumi.yaml, no virtualenv, no backend, no pulumi CLI): exit
    status 2."""


def project_env(project_dir: Path) -> dict[str, str]:
    """The program's virtualenv (Pulumi.yaml runtime.options.virtualenv) first on PATH: an older language
    host ignores the option and runs whatever python comes first (toolchain/README.md)."""
    project_file = project_dir / "Pulumi.yaml"
    if not project_file.is_file():
        raise SetupError(f"{project_dir}: no Pulumi.yaml (run gpupool stacks in the project directory)")
    project = yaml.safe_load(project_file.read_text(encoding="utf-8")) or {}
    runtime = project.get("runtime")
    options = runtime.get("options", {}) if isinstance(runtime, dict) else {}
    venv = project_dir / (options.get("virtualenv") or ".venv")
    install = f"python3 -m venv {venv.name} && {venv.name}/bin/pip install -r requirements.txt"
    if venv.resolve() != project_dir.resolve() and (project_dir / "pyvenv.cfg").exists():
        # `pulumi install` through a language host that never sees the virtualenv option (the v3.79 host this
        # toolchain builds, toolchain/README.md) runs `python -m venv` on the project directory itself
        # (InstallDependenciesWithWriters in sdk/python/python.go of sdk v3.79.0: venvDir "" joined to root).
        # Refused, not cleaned: those files are not gpupool's, and a commit of them is what this prevents.
        raise SetupError(
            f"{project_dir} is itself a virtualenv (pyvenv.cfg, bin/, lib/ at its top): `pulumi install` with a "
            f"language host that ignores Pulumi.yaml's virtualenv made it there. Remove those files (check "
            f"`git status` first), then: {install}"
        )
    if not (venv / "bin" / "python").exists():
        raise SetupError(f"Pulumi.yaml's virtualenv {venv} has no bin/python: {install}")
    return {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}


def workspace(project_dir: Path, env: dict[str, str], command: auto.PulumiCommand | None) -> auto.LocalWorkspace:
    """The project's workspace. Without COMMAND the Automation API runs `pulumi version` from PATH here
    (pulumi/automation/_cmd.py, PulumiCommand.__init__: subprocess.check_output, then the version check): a
    missing, broken or too old CLI is a SetupError in one line."""
    from gpupool.deploy import pulumi_process

    try:
        # pulumi_process.PulumiCommand: an interrupt stops pulumi and its plugins, not only gpupool
        command = command or pulumi_process.PulumiCommand()
        return auto.LocalWorkspace(work_dir=str(project_dir), env_vars=env, pulumi_command=command)
    except FileNotFoundError:
        raise SetupError(
            "no `pulumi` on PATH: install the Pulumi CLI (https://www.pulumi.com/docs/install/) and put it on PATH"
        ) from None
    except subprocess.CalledProcessError as exc:
        raise SetupError(
            f"`pulumi version` failed (exit status {exc.returncode}): check the Pulumi CLI on PATH"
        ) from None
    except OSError as exc:
        raise SetupError(f"the `pulumi` on PATH cannot be run: {exc.strerror or exc}") from None
    except auto.InvalidVersionError as exc:
        raise SetupError(f"the Pulumi CLI on PATH does not fit this Pulumi SDK: {exc}") from None


@contextlib.contextmanager
def extra_env(workspace: Any, env: Mapping[str, str]) -> Iterator[None]:
    """WORKSPACE's environment with ENV added, for the pulumi commands run inside (a workspace passes its
    env_vars to each). Nothing is added without ENV or without an environment (the tests' stand-ins)."""
    before = getattr(workspace, "env_vars", None)
    if not env or before is None:
        yield
        return
    workspace.env_vars = {**before, **env}
    try:
        yield
    finally:
        workspace.env_vars = before


# Reads of the backend (`pulumi stack export`, `pulumi stack tag ls`) run this many at a time: each is a pulumi
# process that mostly starts up and reads one file or object, and a platform of 1,000 tenants has 41 stacks.
READERS = 4


def read_each(names: list[str], read: Callable[[str], T], quiet: bool = False) -> dict[str, T]:
    """NAME -> READ(NAME) for every name, READERS at a time; with QUIET a failed read is left out (its caller
    reads it again on its own, and reports the failure there)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(name: str) -> tuple[str, T] | None:
        try:
            return name, read(name)
        except (auto.CommandError, OSError):
            if quiet:
                return None
            raise

    with ThreadPoolExecutor(max_workers=READERS) as pool:
        return dict(x for x in pool.map(one, names) if x is not None)


def exported_document(workspace: Any, name: str) -> auto.Deployment:
    """What `pulumi stack export --stack NAME` prints, secrets left encrypted: Workspace.export_stack adds
    --show-secrets, which decrypts every secret value (0.72 s against 0.25 s for a state of 180 resources,
    6 Dec 2026), and what reads these (the shard layout, the skip decision, the pending operations a rerun
    drops) reads no secret. `pulumi stack import` takes the encrypted values back as they are."""
    command = getattr(workspace, "pulumi_command", None)
    if command is None:  # a stand-in workspace
        return workspace.export_stack(name)
    env = {"PULUMI_HOME": workspace.pulumi_home} if workspace.pulumi_home else {}
    result = command.run(["stack", "export", "--stack", name], workspace.work_dir, {**env, **workspace.env_vars})
    doc = json.loads(result.stdout)
    return auto.Deployment(version=doc.get("version"), deployment=doc.get("deployment"))


def exported_state(workspace: Any, name: str) -> dict | None:
    """The deployment of exported_document."""
    deployment = exported_document(workspace, name).deployment
    return None if deployment is None else dict(deployment)
