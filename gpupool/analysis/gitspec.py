"""Materialise a spec as it was at a git ref: the spec file, its tenantFiles and its chart path.

`materialize(ref, spec_path, dest)` writes them under `dest` with the same layout relative to the repository
root, so the spec validates there exactly as it did at that commit. Only `git` plumbing is used
(`rev-parse`, `ls-tree`, `cat-file --batch`); the working tree and index are never touched. Not `git archive`:
it skips `export-ignore` paths, so a tenant file marked that way would read as onboarded.

Only the blobs the spec can name are read: the spec, the YAML files under its tenantFiles entries (after the
loader's own containment check: an absolute entry or one with `..` names nothing, GP805), the chart path and
the targets of symlinks among them; they are written byte for byte (a bad encoding is then reported by the
loader, located, like in a working tree). Every other tracked file under the stack's directory and those
paths is written empty (the loader only lists such names, GP911). A blob beyond the input caps
(gpupool.spec.input_limits.LIMITS, read from `git ls-tree -l` before any content) is written as a sparse file of
its size and never read, so the loader refuses it as it would in the working tree. Symlinks are recreated as
symlinks, never resolved here: one whose target stays inside the repository keeps its relative target (and
that target is materialised too); one that leaves the repository points at the same absolute path it
would from the real checkout. The loader then treats them exactly as it treats the working tree's.
"""

from __future__ import annotations

import os
import posixpath
import subprocess
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


def _load(text: str) -> dict:
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # the C parser: big specs
    except (yaml.YAMLError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _tenant_paths(text: str, spec_rel: str) -> list[str]:
    """Repository-relative static prefixes of the spec's tenantFiles entries the loader would read."""
    from gpupool.spec.tenant_paths import escapes

    data = _load(text)
    given = data.get("tenantFiles")
    entries: list = given if isinstance(given, list) else []
    base = posixpath.dirname(spec_rel)
    out = set()
    for entry in entries:
        if not isinstance(entry, str) or not entry or "\0" in entry or escapes(entry):
            continue  # the loader refuses to read there (GP805): nothing to export
        path = posixpath.normpath(posixpath.join(base, _static_prefix(entry)))
        if path != ".." and not path.startswith("../"):
            out.add(path)
    return sorted(out)


def _chart_paths(text: str, spec_rel: str) -> list[str]:
    """The repository-relative chart path the spec names (its files are read whole), if any."""
    cluster = _load(text).get("cluster")
    op = cluster.get("gpuOperator") if isinstance(cluster, dict) else None
    chart = op.get("chartPath") if isinstance(op, dict) else None
    if not isinstance(chart, str) or not chart or chart.startswith("/") or "\0" in chart:
        return []
    path = posixpath.normpath(posixpath.join(posixpath.dirname(spec_rel), _static_prefix(chart)))
    return [] if path == ".." or path.startswith("../") else [path]


def _ls_tree(commit: str, root: Path) -> tuple[list[tuple[str, str, str]], dict[str, int]]:
    """(mode, object id, repository-relative path) of every entry of the commit's tree, recursively, and the
    size of each blob (by object id)."""
    r = _git(["ls-tree", "-r", "-l", "-z", "--full-tree", commit], root, binary=True)
    if r.returncode != 0:
        raise GitSpecError(f"git ls-tree {commit} failed: {r.stderr.decode(errors='replace').strip()}")
    out, sizes = [], {}
    for record in r.stdout.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, _kind, oid, size = meta.decode().split()
        out.append((mode, oid, os.fsdecode(path)))
        if size.isdigit():
            sizes[oid] = int(size)
    return out, sizes


def _cat_blobs(oids: list[str], root: Path) -> dict[str, bytes]:
    """Contents of many blobs in one `git cat-file --batch` process."""
    if not oids:
        return {}
    unique = list(dict.fromkeys(oids))
    try:
        r = subprocess.run(
            ["git", "cat-file", "--batch"],
            cwd=root,
            input=("\n".join(unique) + "\n").encode(),
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        raise GitSpecError("git is not installed or not on PATH") from None
    if r.returncode != 0:
        raise GitSpecError(f"git cat-file --batch failed: {r.stderr.decode(errors='replace').strip()}")
    out, pos, data = {}, 0, r.stdout
    for oid in unique:
        end = data.index(b"\n", pos)
        header = data[pos:end].decode().split(" ")
        if len(header) != 3:  # "<oid> missing"
            raise GitSpecError(f"git cat-file: object {oid} is missing")
        size = int(header[2])
        out[oid] = data[end + 1 : end + 1 + size]
        pos = end + 1 + size + 1  # content, then a newline
    return out


def _under(path: str, prefixes: set[str]) -> bool:
    return any(p == "." or path == p or path.startswith(p + "/") for p in prefixes)


def _link_target(link: str, target: str, root: Path) -> tuple[str | None, str]:
    """(repository-relative path the symlink points at, or None when it leaves the repository; the target
    to write into the materialised tree)."""
    if posixpath.isabs(target):
        return None, target
    inside = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    if inside == ".." or inside.startswith("../"):
        # Where it points from the real checkout: the same path the working tree's symlink reaches.
        return None, os.path.normpath(os.path.join(root, posixpath.dirname(link), target))
    return inside, target


def materialize(ref: str, spec_path: Path | str, dest: Path) -> tuple[Path | None, str]:
    """(path of the spec under dest or None when it did not exist at ref, resolved commit id)."""
    spec_path = Path(os.path.realpath(spec_path))
    root = repo_root(spec_path)
    commit = resolve_ref(ref, root)
    try:
        rel = spec_path.relative_to(root).as_posix()
    except ValueError:
        raise GitSpecError(f"{spec_path} is outside the repository at {root}") from None
    tree, sizes = _ls_tree(commit, root)
    entries = {path: (mode, oid) for mode, oid, path in tree}
    if rel not in entries or entries[rel][0] == "160000":
        return None, commit
    # A spec that was a symlink at the ref: read the file it points at (inside the repository) for the
    # paths it names; the link itself is recreated below like any other.
    text_path, hops = rel, 0
    while entries.get(text_path, ("",))[0] == "120000" and hops < 40:
        inside, _ = _link_target(
            text_path, os.fsdecode(_cat_blobs([entries[text_path][1]], root)[entries[text_path][1]]), root
        )
        text_path, hops = inside or "", hops + 1
    spec_blob = _cat_blobs([entries[text_path][1]], root)[entries[text_path][1]] if text_path in entries else b""
    try:
        spec_text = spec_blob.decode("utf-8")
    except UnicodeDecodeError:
        spec_text = ""  # the loader reports the encoding, located; nothing else can be read from it
    tenant_prefixes, charts = set(_tenant_paths(spec_text, rel)), set(_chart_paths(spec_text, rel))
    wanted = {posixpath.dirname(rel) or ".", *tenant_prefixes, *charts}
    targets: set[str] = set()
    if text_path != rel and text_path in entries:
        wanted.add(text_path)
    chosen: dict[str, tuple[str, str]] = {}
    links: dict[str, str] = {}
    while True:  # symlinks inside the repository pull their targets in (a fixpoint: each pass adds some)
        new = {p: e for p, e in entries.items() if p not in chosen and e[0] != "160000" and _under(p, wanted)}
        if not new:
            break
        chosen.update(new)
        blobs = _cat_blobs([oid for p, (mode, oid) in new.items() if mode == "120000"], root)
        for p, (mode, oid) in new.items():
            if mode == "120000":
                target = os.fsdecode(blobs[oid])
                inside, written = _link_target(p, target, root)
                links[p] = written
                if inside is not None:
                    wanted.add(inside)
                    targets.add(inside)
    # What the loader reads: the spec, YAML under the tenant entries, what links among them point at, the chart.
    readable = {rel, text_path, *targets, *(p for p in chosen if _is_yaml(p) and _under(p, tenant_prefixes))}
    read, oversized = _within_limits(
        [
            (p, oid)
            for p, (mode, oid) in sorted(chosen.items())
            if mode != "120000" and (p in readable or _under(p, charts) or (_is_yaml(p) and _under(p, targets)))
        ],
        sizes,
    )
    blobs = _cat_blobs(sorted({oid for _, oid in read}), root)
    _write_tree(dest, chosen, links, blobs, {p: sizes.get(oid, 0) for p, (_, oid) in chosen.items() if p in oversized})
    return dest / rel, commit


def _write_tree(dest: Path, chosen: dict, links: dict[str, str], blobs: dict[str, bytes], sparse: dict[str, int]):
    """BASE's files under DEST through gpupool.safe_write: a tree can name both a link `t` and a file `t/x`
    (git refuses to check such a tree out; a crafted commit can still hold it), and writing `t/x` must then
    stop at the link instead of writing wherever it points. Such a path is left out: the loader reports the
    missing file, located, as it would any other."""
    from gpupool import safe_write

    with safe_write.Directory.open(os.path.realpath(dest), create=True) as d:  # our own new directory
        for p, (mode, oid) in sorted(chosen.items()):
            try:
                if mode == "120000":
                    d.symlink_new(p, links[p])
                elif oid in blobs:
                    d.write_new(p, blobs[oid])
                else:  # never read: empty (a name the loader lists) or sparse (too large, reported by size)
                    d.sparse_new(p, sparse.get(p, 0))
            except safe_write.Refused:
                continue


def _is_yaml(path: str) -> bool:
    return posixpath.splitext(path)[1].lower() in (".yaml", ".yml")


def _within_limits(blobs: list[tuple[str, str]], sizes: dict[str, int]) -> tuple[list[tuple[str, str]], set[str]]:
    """(the blobs to read, the paths too large to read) under the loader's caps, in path order."""
    from gpupool.spec.input_limits import LIMITS

    left = LIMITS.run_bytes
    read, oversized = [], set()
    for path, oid in blobs:
        size = sizes.get(oid, 0)
        if size > LIMITS.file_bytes or size > left:
            oversized.add(path)
            continue
        left -= size
        read.append((path, oid))
    return read, oversized
