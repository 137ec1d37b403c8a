"""Which files a `tenantFiles` entry names: a directory's YAML files (and what else it holds, to report), a glob,
or one file; and the spellings that would leave the stack directory. Paths only: gpupool.spec.loader reads them."""

from __future__ import annotations

import os
from pathlib import Path

YAML_SUFFIXES = (".yaml", ".yml")  # compared case-insensitively: team.YAML is a tenant file too


def _is_yaml(path: Path) -> bool:
    return path.suffix.lower() in YAML_SUFFIXES


def _inside(path: Path, root: Path) -> bool:
    """True when path, with every symlink resolved, is root or below it."""
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a symlink loop
        return False


def escapes(entry: str) -> str | None:
    """Why an entry may point outside the stack directory by its spelling alone, or None."""
    if Path(entry).is_absolute() or entry.startswith("~"):
        return (
            "is an absolute path; tenant files must live inside the stack directory, so give a path "
            "relative to the spec, such as tenants/"
        )
    if ".." in Path(entry).parts:
        return (
            'climbs out of the stack directory with ".."; tenant files must live inside it, so give a path '
            "below the spec's directory, such as tenants/"
        )
    return None


Found = tuple[Path, Path, Path]  # a tenant file: the path as found, resolved, and as named (links unresolved)


def tenant_files(entry: str, base: Path) -> tuple[list[Found], list[Path]] | str | None:
    """(files, skipped) an entry names; None when it names nothing, or a message when the entry cannot be
    used.

    A directory contributes its *.yaml/*.yml files (any case); what else it holds is returned as skipped,
    so that the caller can say so (a tenant file nobody reads is a quota that silently vanished)."""
    if "\0" in entry:
        return "contains a NUL character; give a path such as tenants/"
    target = base / entry
    try:
        if target.is_dir():
            return _directory_files(target)
        if any(ch in entry for ch in "*?["):
            return sorted((p, p.resolve(), p.parent.resolve() / p.name) for p in base.glob(entry) if p.is_file()), []
        if target.is_file():
            return [(target, target.resolve(), target.parent.resolve() / target.name)], []
    except ValueError as exc:  # e.g. "'**' can only be an entire path component"
        return f"is not a usable glob ({exc}); use a pattern such as tenants/*.yaml or tenants/**/*.yaml"
    except OSError as exc:
        return f"cannot be read ({exc.strerror}); give a readable directory, glob or file"
    return None


def _directory_files(directory: Path) -> tuple[list[Found], list[Path]]:
    """The YAML files of a directory, and what else it holds (hidden entries aside). The directory is
    resolved once; a plain file in it is then resolved by its name alone (only symlinks need the file system
    again): with 1,000 tenant files, resolving each path cost more than parsing it."""
    resolved_dir = directory.resolve()
    files, skipped = [], []
    with os.scandir(directory) as it:
        for e in it:
            if e.name.startswith("."):
                continue  # .gitkeep, editor swap files: never tenant files
            if os.path.splitext(e.name)[1].lower() in YAML_SUFFIXES and e.is_file():
                named = resolved_dir / e.name
                files.append((directory / e.name, (directory / e.name).resolve() if e.is_symlink() else named, named))
            else:
                skipped.append(directory / e.name)
    return sorted(files), sorted(skipped)
