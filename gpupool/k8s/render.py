"""Write the desired objects of a stack as YAML files: one file per object, stable names, stable content."""
from __future__ import annotations

from pathlib import Path

from gpupool.k8s.manifests import Plan, dump_yaml


def file_name(obj) -> str:
    """`<pulumi name>.yaml`: the Pulumi name is unique per stack and never changes for an object."""
    return f"{obj.name}.yaml"


def render_documents(plan: Plan) -> dict[str, str]:
    """file name -> YAML text. Patch objects are written as the patch gpupool applies."""
    out: dict[str, str] = {}
    for obj in plan.objects:
        header = f"# gpupool: component={obj.component}"
        if obj.patch:
            header += " patch=true (server-side apply of these fields onto an existing object)"
        if obj.retain_on_delete:
            header += " retainOnDelete=true"
        out[file_name(obj)] = header + "\n" + dump_yaml(obj.manifest)
    return out


def write(plan: Plan, directory: Path) -> list[Path]:
    """Replace DIR's *.yaml with the stack's objects (so removed objects disappear from the directory)."""
    directory.mkdir(parents=True, exist_ok=True)
    documents = render_documents(plan)
    for stale in directory.glob("*.yaml"):
        if stale.name not in documents:
            stale.unlink()
    written = []
    for name, text in sorted(documents.items()):
        path = directory / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written
