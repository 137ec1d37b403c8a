"""Write the desired objects of a stack as YAML files: one file per object, stable names, stable content.

Render owns only what it wrote, and proves it. Every render leaves an index (`.gpupool-render`: the SHA-256
and name of each file it wrote) in the output directory, and a later render replaces or deletes a file only
when the index lists it and its content still hashes to the listed digest. A non-empty directory without
an index is refused unless the caller forces it, and even then nothing else is deleted or overwritten.
Output directories are often committed (GitOps), so an index, a "leftover" staging directory or a symlink
may be planted by a pull request: all access goes through gpupool.safe_write (no link followed at any
component, every new name created exclusively), and a planted index can at most make render delete, inside
its own directory, a file whose exact content the planter knew.

Writing never leaves a half render behind, and never writes outside the directory: the new files are first
written into a staging directory inside it (where every write can fail without touching anything), then
moved into place with renames. The new index is written as `.gpupool-render.pending` before the first
rename, so even a kill in that short window leaves every file accounted for: the next render treats both
indexes as its own, and removes the killed render's staging directory (only the files its index proves).
"""

from __future__ import annotations

import re
from pathlib import Path

from gpupool import safe_write
from gpupool.k8s import delivery, gitops, rollout
from gpupool.k8s.manifests import Desired, DesiredObjects, dump_yaml

INDEX = ".gpupool-render"
PENDING = ".gpupool-render.pending"
STAGING_PREFIX = ".gpupool-staging-"
NEXT = ".gpupool-render.next"  # the next index, inside the staging directory until it is renamed into place
_INDEXES = (INDEX, PENDING, NEXT)
# What an index may name: a file in the directory or in one subdirectory of it (never `..`, never absolute).
_SAFE_NAME = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,254}(?:/[A-Za-z0-9_][A-Za-z0-9._-]{0,254})?"
# An index line: `SHA256  NAME` (the format of sha256sum), or a bare NAME as gpupool wrote it before digests.
_LINE = re.compile(rf"^(?:(?P<digest>[0-9a-f]{{64}})  )?(?P<name>{_SAFE_NAME})$")
_HEADER = b"# Written by `gpupool render`"
# A file an index lists without a digest (written before digests) counts as gpupool's when it starts so.
_LEGACY_PROOF = b"# gpupool: "
MAX_INDEX_BYTES = 64 << 20  # an index of a million files is ~100 MB less than this; a planted one is cut here


class RenderError(Exception):
    """A problem with the output directory (refused, or a write failed): reported as exit 1. PARTIAL: some
    files were already moved into place (the pending index accounts for them; the next render finishes)."""

    def __init__(self, message: str, partial: bool = False):
        super().__init__(message)
        self.partial = partial


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
    if obj.kind == "Node" and rollout.LABEL_MIG_CONFIG in obj.manifest["metadata"].get("labels", {}):
        header += (
            "\n# gpupool: the final labels; the rolling MIG re-layout (cordon, relabel, wait, uncordon, a few nodes"
            "\n# at a time) runs only under Pulumi: applied as files, every node of the pool is relabelled at once"
        )
    if obj.wait_for:
        # Pulumi waits (pulumi.com/waitFor, added by the component); a plain apply does not (see docs/explanation/design.md, "Rolling MIG re-layout").
        header += f"\n# gpupool: pulumi waits up to {obj.timeout_seconds}s for {obj.wait_for}"
    return header + "\n" + dump_yaml(obj.manifest)


def objects(plan: DesiredObjects, operator: str = delivery.DEFAULT_MODE) -> list[Desired]:
    """The plan's objects as files for a plain apply (gpupool.k8s.gitops: one Node document per node, prune
    protection where retained) with the operator chart as MODE's objects, in registration order."""
    out = gitops.for_apply(list(plan.objects))
    after = 0  # the end of the previous release's objects: the releases keep their order (DesiredObjects.charts)
    for chart in plan.charts():
        chart_objects = delivery.objects(chart, operator)
        # Right after the objects the chart depends on, as the component installs it.
        at = max((i for i, o in enumerate(out) if o.name in chart.depends_on), default=len(out) - 1) + 1
        at = max(at, after)
        out[at:at] = chart_objects
        after = at + len(chart_objects)
    return out


KUEUE_CONFIG_FILE = "kueue/configuration.yaml"  # a subdirectory, like the chart values: `kubectl apply -f DIR` skips it


def render_documents(plan: DesiredObjects, operator: str = delivery.DEFAULT_MODE) -> dict[str, str]:
    """file name -> text, in registration order. Patch objects are written as the patch gpupool applies."""
    out = {file_name(obj): _document(obj) for obj in objects(plan, operator)}
    resources = list(out)
    if operator == "values":
        for chart, what in zip(plan.charts(), ("GPU Operator", "DRA driver"), strict=False):
            name = delivery.values_file(chart)
            hint = delivery.helm_install_hint(chart, f"<dir>/{name}")
            out[name] = f"# gpupool: {what} chart values (not a Kubernetes object)\n# {hint}\n" + dump_yaml(
                chart.values
            )
    if plan.queues is not None:
        out[KUEUE_CONFIG_FILE] = (
            "# gpupool: the Configuration Kueue must run with for this platform's queues (not a Kubernetes object:\n"
            "# the controller_manager_config.yaml of Kueue's install; docs/explanation/queueing.md)\n"
            + dump_yaml(plan.queues.configuration)
        )
    out[gitops.KUSTOMIZATION_FILE] = gitops.kustomization(resources)
    return out


def stream(plan: DesiredObjects, operator: str = delivery.DEFAULT_MODE) -> str:
    """One multi-document YAML stream of every object (`--output-dir -`), in registration order, so
    `kubectl apply -f -` creates each namespace before what lives in it."""
    if operator == "values":
        raise delivery.DeliveryError(
            "--operator values writes a separate values file; use --output-dir DIR, "
            "or --operator helmrelease|argocd for a stream"
        )
    return "".join(f"---\n{_document(obj)}" for obj in objects(plan, operator))


# -- the index -------------------------------------------------------------------------------------

Owned = dict[str, set[str]]  # file name -> the digests that prove gpupool wrote it


def _read_index(d: safe_write.Directory, name: str) -> Owned | None:
    """The files index NAME lists with their digests; None when there is no such index. Refused when it is
    a link, not a regular file, too large, or not an index gpupool wrote (its header)."""
    data = d.read(name, MAX_INDEX_BYTES)
    if data is None:
        return None
    if not data.startswith(_HEADER):
        raise safe_write.Refused(d.where(name), "is not an index gpupool wrote; move it away")
    owned: Owned = {}
    for raw in data.decode("utf-8", "replace").splitlines():
        m = _LINE.match(raw.strip())
        if m:  # anything else is ignored, never deleted
            digests = owned.setdefault(m["name"], set())
            if m["digest"]:
                digests.add(m["digest"])
            else:
                digests.update(_legacy_digest(d, m["name"]))
    return owned


def _legacy_digest(d: safe_write.Directory, name: str) -> set[str]:
    try:
        data = d.read(name, MAX_INDEX_BYTES)
    except safe_write.Refused:
        return set()
    return {safe_write.digest(data)} if data is not None and data.startswith(_LEGACY_PROOF) else set()


def _index_text(owned: Owned) -> str:
    lines = [f"{h}  {n}\n" for n in sorted(owned) for h in sorted(owned[n])]
    return (
        _HEADER.decode() + ": the files below (SHA-256 and name) are gpupool's. A later render\n"
        "# replaces or removes only these, and only while their content is unchanged; every other file in\n"
        "# this directory is left alone.\n" + "".join(lines)
    )


def _merge(*owned: Owned | None) -> Owned:
    out: Owned = {}
    for o in owned:
        for name, digests in (o or {}).items():
            out.setdefault(name, set()).update(digests)
    return out


def _foreign(d: safe_write.Directory, mine: Owned, new: dict[str, str]) -> list[str]:
    """Entries of the directory (and of the subdirectories gpupool writes) that gpupool did not write."""
    subdirs = {n.split("/")[0] for n in [*mine, *new] if "/" in n}
    out = []
    for entry in d.entries():
        if entry in _INDEXES or entry.startswith(STAGING_PREFIX) or entry in mine:
            continue
        if entry in subdirs and d.kind(entry) == "dir":
            out += [f"{entry}/{e}" for e in d.entries(entry) if f"{entry}/{e}" not in mine]
            continue
        out.append(entry)
    return out


# -- writing ------------------------------------------------------------------------------------------


def _write_file(d: safe_write.Directory, name: str, text: str) -> None:
    """Every file render writes goes through here (inside its staging directory, created exclusively)."""
    d.write_new(name, text)


def _remove_render(d: safe_write.Directory, name: str) -> None:
    """Delete, in the directory NAME beneath D, the files its indexes prove, the indexes, then NAME itself
    if that left it empty. What cannot be proven stays."""
    try:
        sub = d.subdir(name)
    except safe_write.Refused:
        return
    with sub:
        try:
            mine = _merge(*(_read_index(sub, i) for i in _INDEXES))
        except safe_write.Refused:
            return
        for file in sorted(mine, key=lambda n: -n.count("/")):
            sub.remove_proven(file, mine[file])
        for subdir in sorted({n.split("/")[0] for n in mine if "/" in n}):
            sub.remove_empty_dir(subdir)
        for index in _INDEXES:
            try:
                data = sub.read(index, MAX_INDEX_BYTES)
            except safe_write.Refused:
                continue
            if data is not None and data.startswith(_HEADER):
                sub.remove_proven(index, {safe_write.digest(data)})
    d.remove_empty_dir(name)


def _clean_leftovers(d: safe_write.Directory) -> None:
    """Staging directories of renders that were killed: only what their indexes prove is removed."""
    for entry in d.entries():
        if entry.startswith(STAGING_PREFIX) and d.kind(entry) == "dir":
            _remove_render(d, entry)


def write(documents: dict[str, str], directory: Path, *, force: bool = False) -> list[Path]:
    """Make DIRECTORY hold exactly DOCUMENTS among the files gpupool wrote. Raises RenderError."""
    try:
        with safe_write.Directory.open(directory, create=True) as d:
            _write(d, documents, force)
    except safe_write.Refused as exc:
        raise RenderError(str(exc)) from None
    except OSError as exc:  # what the layer did not name (listing a directory, say)
        raise RenderError(f"{exc.filename or directory}: {safe_write.reason(exc)}") from None
    return [Path(directory) / n for n in documents]


def _write(d: safe_write.Directory, documents: dict[str, str], force: bool) -> None:
    for name in documents:
        if not re.fullmatch(_SAFE_NAME, name):
            raise safe_write.Refused(d.where(name), "is not a file name render writes")
    _clean_leftovers(d)
    index, pending = _read_index(d, INDEX), _read_index(d, PENDING)
    mine = _merge(index, pending)
    foreign = _foreign(d, mine, documents)
    if index is None and pending is None and foreign and not force:
        raise RenderError(
            f"{d.shown}: not empty and not a previous gpupool render (no {INDEX} index); "
            "refusing to write into it. Use an empty directory, or pass --force to add the "
            "files anyway (gpupool never deletes or overwrites files it did not write)"
        )
    new: Owned = {n: {safe_write.digest(t)} for n, t in documents.items()}
    # Refuse before writing anything: every name render replaces is missing or provably gpupool's.
    for name in documents:
        kind = d.kind(name)
        if kind != "missing" and not (kind == "file" and d.proven(name, mine.get(name, ()))):
            reason = safe_write.refusal(kind)
            if kind == "file" and name in mine:
                reason = "has changed since gpupool wrote it (its digest is not the index's); not overwriting it"
            raise RenderError(f"{d.where(name)}: {reason} (move it away, or render into another directory)")
    staging = d.make_temp_dir(STAGING_PREFIX)
    with d.subdir(staging) as st:
        try:
            _write_file(st, INDEX, _index_text(new))  # first: a leftover staging directory says what it holds
            for name, text in documents.items():
                _write_file(st, name, text)
            _write_file(st, NEXT, _index_text(_merge(mine, new)))
        except BaseException:
            _remove_render(d, staging)
            raise
        st.rename(NEXT, d, PENDING, proof=_index_digest(d, PENDING))
        try:
            _move_in(st, d, documents, mine, new)
        except safe_write.Refused as exc:
            raise RenderError(
                f"{exc}; the render stopped half way (every file is listed in {PENDING}: fix the cause and "
                "render again to finish it)",
                partial=True,
            ) from None
    _remove_render(d, staging)


def _move_in(st: safe_write.Directory, d: safe_write.Directory, documents, mine: Owned, new: Owned) -> None:
    """Rename each staged file into place, delete what is no longer rendered, then swap the index in."""
    for name in documents:
        (src, last), (dst, _) = st.parent_of(name), d.parent_of(name, create=True)
        with src, dst:
            src.rename(last, dst, last, proof=mine.get(name, ()))
    for name in sorted(set(mine) - set(documents), key=lambda n: -n.count("/")):
        d.remove_proven(name, mine[name])
    for sub in sorted({n.split("/")[0] for n in set(mine) - set(documents) if "/" in n}):
        d.remove_empty_dir(sub)
    _write_file(st, NEXT, _index_text(new))
    st.rename(NEXT, d, INDEX, proof=_index_digest(d, INDEX))
    d.remove_proven(PENDING, _index_digest(d, PENDING))


def _index_digest(d: safe_write.Directory, name: str) -> set[str]:
    """The proof for replacing index NAME: its own digest when it is an index gpupool wrote."""
    data = d.read(name, MAX_INDEX_BYTES)
    return {safe_write.digest(data)} if data is not None and data.startswith(_HEADER) else set()
