"""What render adds for kubectl, Flux and Argo CD, which apply files as they are and have no Pulumi.

Two transforms of the desired objects, nothing else (tests/test_program.py pins render == these of what the
components register):

1. **One Node document per node.** Pulumi registers a chain of patches per MIG node (gpupool.k8s.rollout:
   cordon, relabel, wait, check, uncordon) plus the pool's labels; as files, those are several documents of
   one object. `kubectl apply -f DIR` applies them in turn, each one server-side-applied as the same field
   manager, so the last (the uncordon) releases what the others set: the node lost every gpupool label.
   `kubectl kustomize` (and so Flux) refuses two documents of one id; Argo CD keeps one. So each node gets
   one document with its final labels: the pool's labels and `nvidia.com/mig.config`. Left out is what only
   the chain's waits give meaning to: the cordon (nothing would ever uncordon), the `pending` state (MIG
   Manager owns that label; re-applied on every sync it would hide MIG Manager's answer) and the check record
   and rollout annotations (no check ran).
2. **Prune protection where the spec retains.** Pulumi's retainOnDelete is an option of the engine; Flux
   and Argo CD only see the objects. Every retained object carries the annotations they honour
   (`kustomize.toolkit.fluxcd.io/prune: disabled`, `argocd.argoproj.io/sync-options: Prune=false`), and no
   other object does, so removing a tenant from the spec never deletes its namespace under GitOps either.

Neither goes into what Pulumi registers: Pulumi ignores the annotations, and adding them there would make
every existing stack re-apply every retained object, the rollout chain's cordons included.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from gpupool.k8s import rollout
from gpupool.k8s.manifests import Desired, dump_yaml

FLUX_PRUNE = "kustomize.toolkit.fluxcd.io/prune"
ARGO_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
PRUNE_PROTECTION = {FLUX_PRUNE: "disabled", ARGO_SYNC_OPTIONS: "Prune=false"}
# kustomize's third file name (konfig.RecognizedKustomizationFileNames; Argo CD's KustomizationNames):
# `kubectl apply -f DIR` reads every *.yaml, *.yml and *.json there, and a kustomization.yaml in DIR made it
# fail ('no matches for kind "Kustomization"', exit 1; seen against kube-apiserver 1.36.3). Without an
# extension, apply -f skips it and kustomize, Flux and Argo CD still find it.
KUSTOMIZATION_FILE = "Kustomization"
# Written by the rollout chain for its own waits; not part of a node's final state under a plain apply.
_CHAIN_ONLY_LABELS = (rollout.LABEL_STATE, rollout.LABEL_CHECKED)
_CHAIN_ONLY_ANNOTATIONS = (
    rollout.ANNOTATION_TARGET,
    rollout.ANNOTATION_APPLIED,
    rollout.ANNOTATION_ARMED,
    rollout.ANNOTATION_READY,
    rollout.ANNOTATION_SHARING_TARGET,
)


def for_apply(objects: list[Desired]) -> list[Desired]:
    """OBJECTS as files for a plain apply: one Node document per node, prune protection where retained."""
    return [_protected(o) if o.retain_on_delete else o for o in one_document_per_node(objects)]


def one_document_per_node(objects: list[Desired]) -> list[Desired]:
    """Each node's patches merged into one, at the place of the node's last patch (the pool's labels)."""
    nodes: dict[str, list[Desired]] = {}
    for obj in objects:
        if obj.patch and obj.kind == "Node":
            nodes.setdefault(obj.manifest["metadata"]["name"], []).append(obj)
    # At the node's pool patch (the one name without a "_step" suffix: rollout.names), else its last patch.
    anchor = {node: next((p for p in patches if "_" not in p.name), patches[-1]) for node, patches in nodes.items()}
    last = {id(anchor[node]): _merged(patches, anchor[node]) for node, patches in nodes.items()}
    gone = {o.name for node, patches in nodes.items() for o in patches if o is not anchor[node]}
    out = []
    for obj in objects:
        if obj.name in gone:
            continue
        merged = last.get(id(obj), obj)
        if merged.depends_on and gone.intersection(merged.depends_on):
            merged = dataclasses.replace(merged, depends_on=tuple(d for d in merged.depends_on if d not in gone))
        out.append(merged)
    return out


def _merged(patches: list[Desired], final: Desired) -> Desired:
    labels: dict[str, Any] = {}
    annotations: dict[str, Any] = {}
    for patch in patches:
        meta = patch.manifest["metadata"]
        labels.update({k: v for k, v in meta.get("labels", {}).items() if k not in _CHAIN_ONLY_LABELS})
        annotations.update({k: v for k, v in meta.get("annotations", {}).items() if k not in _CHAIN_ONLY_ANNOTATIONS})
    metadata: dict[str, Any] = {"name": final.manifest["metadata"]["name"]}
    if labels:
        metadata["labels"] = dict(sorted(labels.items()))
    if annotations:
        metadata["annotations"] = annotations
    manifest = {"apiVersion": final.manifest["apiVersion"], "kind": "Node", "metadata": metadata}
    return dataclasses.replace(
        final,
        manifest=manifest,
        retain_on_delete=any(p.retain_on_delete for p in patches),
        timeout_seconds=None,
        wait_for=None,
        field_manager=None,
        ignore_changes=(),
    )


def _protected(obj: Desired) -> Desired:
    manifest = copy.deepcopy(obj.manifest)
    manifest["metadata"]["annotations"] = {**manifest["metadata"].get("annotations", {}), **PRUNE_PROTECTION}
    return dataclasses.replace(obj, manifest=manifest)


def kustomization(resources: list[str]) -> str:
    """The Kustomization naming RESOURCES (file names, in apply order): what `kubectl kustomize DIR`, Flux's
    kustomize-controller and Argo CD build the directory from."""
    header = "# gpupool: the rendered objects, for kubectl kustomize, Flux and Argo CD (kubectl apply -f skips it)\n"
    body = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources}
    return header + dump_yaml(body)
