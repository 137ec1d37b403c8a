"""A project directory whose `pulumi` is a fake script, for testing ci/pulumi-stack.sh without the toolchain."""

from __future__ import annotations

import sys
from pathlib import Path


def fake_project(tmp_path: Path, fake_pulumi: str) -> tuple[Path, Path]:
    """(bin dir holding the fake `pulumi`, project dir with Pulumi.yaml and its venv's python and gpupool)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text(fake_pulumi)
    (bin_dir / "pulumi").chmod(0o755)
    project = tmp_path / "project"
    venv_bin = project / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    (venv_bin / "gpupool").write_text(f'#!/bin/sh\nexec {sys.executable} -m gpupool "$@"\n')
    (venv_bin / "gpupool").chmod(0o755)
    (project / "Pulumi.yaml").write_text("name: p\nruntime:\n  name: python\n  options:\n    virtualenv: venv\n")
    return bin_dir, project
