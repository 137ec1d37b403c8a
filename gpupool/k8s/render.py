"""Write the desired objects of a stack as YAML files: one file per object, stable names, stable content.

Render owns only what it wrote. Every render leaves an index (`.gpupool-render`, one file name per line)
in the output directory, and a later render deletes only files that an index lists. A non-empty
directory without an index is refused unless the caller forces it, and even then nothing outside the
index is deleted or overwritten.

Writing never leaves a half render behind:
- When the directory holds nothing but a previous render (or does not exist), the new render is written
  into a sibling directory and swapped in with one rename (renameat2 RENAME_EXCHANGE on Linux), so the
  directory is always either the old render or the new one (against a crash of gpupool; files are not
  fsynced, so after a power loss the file system's own guarantees apply).
- When the user keeps their own files there too, the new files are first written into a staging
  directory inside it (where every write can fail without touching anything), then moved into place with
  renames. The new index is written as `.gpupool-render.pending` before the first rename, so even a kill in
  that short window leaves every file accounted for: the next render treats both indexes as its own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import re
import stat
import tempfile
from pathlib import Path

from gpupool.k8s import delivery
from gpupool.k8s.manifests import Desired, Plan, dump_yaml

INDEX = ".gpupool-render"
PENDING = ".gpupool-render.pending"
STAGING_PREFIX = ".gpupool-staging-"
NEW_SUFFIX = ".gpupool-new-"  # sibling directory: .<dir name>.gpupool-new-XXXX
# What an index may name: a file in the directory or in one subdirectory of it (never `..`, never absolute).
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)?$")


class RenderError(Exception):
    """A problem with the output directory (refused, or a write failed): reported as exit 1."""


def file_name(obj: Desired) -> str:
    """`<pulumi name>.yaml`: the Pulumi name is unique per stack and never changes for an object."""
    return f"{obj.name}.yaml"


def _document(obj: Desired) -> str:
    header = f"# gpupool: component={obj.component}"
    if obj.patch:
        header += (
            " patch=true (server-side apply of these fields onto an existing object: "
            "kubectl apply --server-side --force-conflicts)"
        )
    if obj.retain_on_delete:
        header += " retainOnDelete=true"
    if obj.wait_for:
        # Pulumi waits (pulumi.com/waitFor, added by the component); a plain apply does not (see docs/design.md, "Rolling MIG re-layout").
        header += f"\n# gpupool: pulumi waits up to {obj.timeout_seconds}s for {obj.wait_for}"
    return header + "\n" + dump_yaml(obj.manifest)


def objects(plan: Plan, operator: str = delivery.DEFAULT_MODE) -> list[Desired]:
    """The plan's objects with the operator chart as MODE's objects, in registration order."""
    out = list(plan.objects)
    if plan.chart is not None:
        chart_objects = delivery.objects(plan.chart, operator)
        # Right after the config maps the chart depends on, as the component installs it.
        at = max((i for i, o in enumerate(out) if o.name in plan.chart.depends_on), default=len(out) - 1) + 1
        out[at:at] = chart_objects
    return out


def render_documents(plan: Plan, operator: str = delivery.DEFAULT_MODE) -> dict[str, str]:
    """file name -> text, in registration order. Patch objects are written as the patch gpupool applies."""
    out = {file_name(obj): _document(obj) for obj in objects(plan, operator)}
    if operator == "values" and plan.chart is not None:
        hint = delivery.helm_install_hint(plan.chart, f"<dir>/{delivery.VALUES_FILE}")
        out[delivery.VALUES_FILE] = (
            f"# gpupool: GPU Operator chart values (not a Kubernetes object)\n# {hint}\n" + dump_yaml(plan.chart.values)
        )
    return out


def stream(plan: Plan, operator: str = delivery.DEFAULT_MODE) -> str:
    """One multi-document YAML stream of every object (`--output-dir -`), in registration order, so
    `kubectl apply -f -` creates each namespace before what lives in it."""
    if operator == "values":
        raise delivery.DeliveryError(
            "--operator values writes a separate values file; use --output-dir DIR, "
            "or --operator helmrelease|argocd for a stream"
        )
    return "".join(f"---\n{_document(obj)}" for obj in objects(plan, operator))


# -- the index -------------------------------------------------------------------------------------


def _read_index(path: Path) -> set[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return set()
    names = set()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and _SAFE_NAME.match(line):  # anything else is ignored, never deleted
            names.add(line)
    return names


def _index_text(names) -> str:
    return (
        "# Written by `gpupool render`: the files below are gpupool's. A later render replaces or removes\n"
        "# only these; every other file in this directory is left alone.\n" + "".join(f"{n}\n" for n in sorted(names))
    )


def owned(directory: Path) -> set[str] | None:
    """Files a previous render wrote here (both indexes if a render was interrupted); None: no render here."""
    if not (directory / INDEX).exists() and not (directory / PENDING).exists():
        return None
    return _read_index(directory / INDEX) | _read_index(directory / PENDING)


def _foreign(directory: Path, mine: set[str]) -> list[str]:
    """Entries of DIRECTORY (and of the subdirectories an index names) that gpupool did not write."""
    if not directory.is_dir():
        return []
    subdirs = {n.split("/")[0] for n in mine if "/" in n}
    out = []
    for entry in sorted(os.listdir(directory)):
        if entry in (INDEX, PENDING) or entry.startswith(STAGING_PREFIX) or entry in mine:
            continue
        if entry in subdirs and (directory / entry).is_dir() and not (directory / entry).is_symlink():
            out += [f"{entry}/{e}" for e in sorted(os.listdir(directory / entry)) if f"{entry}/{e}" not in mine]
            continue
        out.append(entry)
    return out


# -- writing ------------------------------------------------------------------------------------------


def _write_file(path: Path, text: str) -> None:
    path.parent.mkdir(exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _write_all(directory: Path, documents: dict[str, str]) -> None:
    """Write the index first (so a leftover staging directory says what it holds), then every file."""
    _write_file(directory / INDEX, _index_text(documents))
    for name, text in documents.items():
        try:
            _write_file(directory / name, text)
        except OSError as exc:
            raise RenderError(_os_message(exc, f"cannot write {name}")) from exc


def _os_message(exc: OSError, what: str) -> str:
    reasons: dict[int | None, str] = {
        errno.ENAMETOOLONG: "the path is too long for the file system",
        errno.EACCES: "permission denied",
        errno.EROFS: "read-only file system",
        errno.ENOSPC: "no space left on the device",
    }
    reason = reasons.get(exc.errno, exc.strerror or str(exc))  # errno is None for an OSError raised by hand
    return f"{what}: {reason}"


def _remove_render(directory: Path) -> None:
    """Delete what DIRECTORY's indexes list, the indexes, then the directory if that left it empty."""
    mine = owned(directory) or set()
    for name in sorted(mine, key=lambda n: -n.count("/")):
        path = directory / name
        if path.is_file() and not path.is_symlink():
            path.unlink()
    for sub in sorted({n.split("/")[0] for n in mine if "/" in n}):
        try:
            (directory / sub).rmdir()
        except OSError:
            pass  # holds something gpupool did not write: keep it
    for name in (INDEX, PENDING):
        (directory / name).unlink(missing_ok=True)
    try:
        directory.rmdir()
    except OSError:
        pass


def _clean_leftovers(directory: Path) -> None:
    """Staging directories of renders that were killed: they hold only files their index lists."""
    places = [(directory, STAGING_PREFIX), (directory.parent, f".{directory.name}{NEW_SUFFIX}")]
    for place, prefix in places:
        if not place.is_dir():
            continue
        for entry in place.iterdir():
            if entry.name.startswith(prefix) and entry.is_dir() and not entry.is_symlink():
                _remove_render(entry)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories (Linux renameat2). False where the system cannot."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _is_cwd_or_above(directory: Path) -> bool:
    cwd = Path.cwd().resolve()
    return directory == cwd or directory in cwd.parents


def write(documents: dict[str, str], directory: Path, *, force: bool = False) -> list[Path]:
    """Make DIRECTORY hold exactly DOCUMENTS among the files gpupool wrote. Raises RenderError."""
    directory = Path(os.path.abspath(directory))
    if directory.exists() and not directory.is_dir():
        raise RenderError(f"{directory}: exists and is not a directory")
    _clean_leftovers(directory)
    mine = owned(directory)
    foreign = _foreign(directory, mine or set())
    if mine is None and foreign and not force:
        raise RenderError(
            f"{directory}: not empty and not a previous gpupool render (no {INDEX} index); "
            "refusing to write into it. Use an empty directory, or pass --force to add the "
            "files anyway (gpupool never deletes or overwrites files it did not write)"
        )
    clashes = [n for n in documents if n in foreign or (directory / n).exists() and n not in (mine or set())]
    if clashes:
        raise RenderError(
            f"{directory / clashes[0]}: exists and was not written by gpupool; not overwriting "
            "it (move it away, or render into another directory)"
        )
    try:
        swapped = (
            not foreign
            and not directory.is_symlink()
            and not _is_cwd_or_above(directory)
            and _swap_in(documents, directory)
        )
        if not swapped:
            _move_in(documents, directory, mine or set())
    except RenderError:
        raise
    except OSError as exc:
        raise RenderError(_os_message(exc, f"{exc.filename or directory}")) from exc
    return [directory / n for n in documents]


# The directory cannot be swapped (a mount point, an unwritable parent, another file system): write in place.
_NO_SWAP = (errno.EBUSY, errno.EXDEV, errno.EACCES, errno.EPERM, errno.EROFS)


def _swap_in(documents: dict[str, str], directory: Path) -> bool:
    """The directory holds only a previous render (or nothing): build the new one beside it and swap.
    Returns False, having changed nothing, where the directory cannot be swapped."""
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        new = Path(tempfile.mkdtemp(prefix=f".{directory.name}{NEW_SUFFIX}", dir=directory.parent))
    except OSError as exc:
        if exc.errno in _NO_SWAP:
            return False
        raise
    try:
        os.chmod(new, stat.S_IMODE(directory.stat().st_mode) if directory.exists() else 0o777 & ~_umask())
        _write_all(new, documents)
        if directory.exists():
            try:
                exchanged = _exchange(new, directory)
            except OSError as exc:
                if exc.errno in _NO_SWAP:
                    _remove_render(new)
                    return False
                raise
            if not exchanged:
                # No atomic exchange here: move the old render aside, then the new one in (a kill between
                # the two renames leaves both beside DIR, each with its index).
                aside = Path(tempfile.mkdtemp(prefix=f".{directory.name}{NEW_SUFFIX}", dir=directory.parent))
                os.rename(directory, aside / "old")
                os.rename(new, directory)
                _remove_render(aside / "old")
                aside.rmdir()
                return True
            # `new` now holds the previous render
        else:
            os.rename(new, directory)
            return True
    except BaseException:
        _remove_render(new)
        raise
    _remove_render(new)
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _move_in(documents: dict[str, str], directory: Path, previous: set[str]) -> None:
    """The user keeps files here too: stage inside the directory, then rename each file into place."""
    directory.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=directory))
    try:
        _write_all(staging, documents)
    except BaseException:
        _remove_render(staging)
        raise
    _replace_text(directory / PENDING, _index_text(set(documents) | previous))
    for name in documents:
        (directory / name).parent.mkdir(exist_ok=True)
        os.replace(staging / name, directory / name)
    for name in sorted(previous - set(documents)):
        path = directory / name
        if path.is_file() and not path.is_symlink():
            path.unlink()
    for sub in {n.split("/")[0] for n in previous - set(documents) if "/" in n}:
        try:
            (directory / sub).rmdir()
        except OSError:
            pass
    _replace_text(directory / INDEX, _index_text(documents))
    (directory / PENDING).unlink()
    _remove_render(staging)


def _replace_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    _write_file(tmp, text)
    os.replace(tmp, path)
