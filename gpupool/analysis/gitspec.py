"""Materialise a spec as it was at a git ref: the spec file, its tenantFiles and its chart path.

`materialize(ref, spec_path, dest)` writes them under `dest` with the same layout relative to the repository
root, so the spec validates there exactly as it did at that commit. Only `git` plumbing is used
(`rev-parse`, `show`, `archive`); the working tree and index are never touched.
"""
from __future__ import annotations

import io
import os
import posixpath
import subprocess
import tarfile
from pathlib import Path

import yaml

_GLOB = set("*?[")


class GitSpecError(Exception):
    """A usage problem: not a git repository, unknown ref, git missing."""


def _git(args: list[str], cwd: Path, *, binary: bool = False) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=not binary, check=False)
    except FileNotFoundError:
        raise GitSpecError("git is not installed or not on PATH") from None


def repo_root(path: Path) -> Path:
    start = path if path.is_dir() else path.parent
    r = _git(["rev-parse", "--show-toplevel"], start)
    if r.returncode != 0:
        raise GitSpecError(f"{path} is not inside a git repository ({r.stderr.strip() or 'git rev-parse failed'})")
    return Path(os.path.realpath(r.stdout.strip()))


def resolve_ref(ref: str, root: Path) -> str:
    if not ref or ref.startswith("-"):
        raise GitSpecError(f"bad git ref {ref!r}")
    r = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], root)
    if r.returncode != 0 or not r.stdout.strip():
        hint = " (in CI, check out with fetch-depth: 0 so the base branch exists)" if "/" in ref else ""
        raise GitSpecError(f"unknown git ref {ref!r}: no such commit, branch or tag{hint}")
    return r.stdout.strip()


def _static_prefix(rel_entry: str) -> str:
    """The directory part of a path or glob before its first wildcard: what to export for it."""
    parts = []
    for part in rel_entry.split("/"):
        if _GLOB & set(part):
            break
        parts.append(part)
    return "/".join(parts) or "."


def _referenced_paths(text: str, spec_rel: str) -> list[str]:
    """Repository-relative paths the spec names (tenantFiles entries, gpuOperator.chartPath)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    if not isinstance(data, dict):
        return []
    base = posixpath.dirname(spec_rel)
    entries = [e for e in (data.get("tenantFiles") or []) if isinstance(e, str) and e] \
        if isinstance(data.get("tenantFiles"), list) else []
    op = (data.get("cluster") or {}).get("gpuOperator") if isinstance(data.get("cluster"), dict) else None
    if isinstance(op, dict) and isinstance(op.get("chartPath"), str) and op["chartPath"]:
        entries.append(op["chartPath"])
    out = []
    for entry in entries:
        if entry.startswith("/"):
            continue  # absolute paths are outside the repository: nothing to export
        path = posixpath.normpath(posixpath.join(base, _static_prefix(entry)))
        if path == ".." or path.startswith("../"):
            continue
        out.append(path)
    return sorted(set(out))


def materialize(ref: str, spec_path: Path | str, dest: Path) -> tuple[Path | None, str]:
    """(path of the spec under dest or None when it did not exist at ref, resolved commit id)."""
    spec_path = Path(os.path.realpath(spec_path))
    root = repo_root(spec_path)
    commit = resolve_ref(ref, root)
    try:
        rel = spec_path.relative_to(root).as_posix()
    except ValueError:
        raise GitSpecError(f"{spec_path} is outside the repository at {root}") from None
    shown = _git(["show", f"{commit}:{rel}"], root)
    if shown.returncode != 0:
        return None, commit
    target = dest / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(shown.stdout)
    existing = [p for p in _referenced_paths(shown.stdout, rel)
                if _git(["cat-file", "-e", f"{commit}:{p}" if p != "." else commit], root).returncode == 0]
    if existing:
        archive = _git(["archive", "--format=tar", commit, "--", *existing], root, binary=True)
        if archive.returncode != 0:
            raise GitSpecError(f"git archive {ref} failed: {archive.stderr.decode(errors='replace').strip()}")
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            members = [mb for mb in tar.getmembers() if mb.name != rel]  # keep the spec from `git show`
            tar.extractall(dest, members=members, filter="data")
    return target, commit
