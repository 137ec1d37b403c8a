"""Render for plain applies (gpupool.k8s.gitops): one Node document per node, prune protection exactly where
the spec retains, and a Kustomization naming every object file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpupool.k8s import gitops, manifests, rollout
from gpupool.k8s.delivery import MODES, VALUES_FILE
from gpupool.k8s.render import KUEUE_CONFIG_FILE, render_documents, stream, write
from gpupool.rules.engine import load_valid_spec

ROOT = Path(__file__).resolve().parent.parent
STACKS = ["dev", "prod"]


def _plan(stack: str) -> manifests.DesiredObjects:
    return manifests.build(load_valid_spec(ROOT / "stacks" / stack / "spec.yaml"))


def _objects(documents: dict[str, str]) -> dict[str, dict]:
    not_objects = (VALUES_FILE, gitops.KUSTOMIZATION_FILE, KUEUE_CONFIG_FILE)
    return {n: yaml.safe_load(t) for n, t in documents.items() if n not in not_objects}


@pytest.mark.parametrize("stack", STACKS)
def test_each_node_is_one_document_with_its_final_labels(stack):
    plan = _plan(stack)
    patches: dict[str, list[manifests.Desired]] = {}
    for o in plan.objects:
        if o.kind == "Node":
            patches.setdefault(o.manifest["metadata"]["name"], []).append(o)
    assert any(len(p) > 1 for p in patches.values()), "no MIG rollout chain in this stack"
    nodes = [d for d in _objects(render_documents(plan, "helmrelease")).values() if d["kind"] == "Node"]
    assert sorted(d["metadata"]["name"] for d in nodes) == sorted(patches)
    for doc in nodes:
        own = patches[doc["metadata"]["name"]]
        pool_labels = own[-1].manifest["metadata"]["labels"]  # the pool's patch comes after the chain
        mig = [p.manifest["metadata"]["labels"][rollout.LABEL_MIG_CONFIG] for p in own if p.name.endswith("_mig")]
        expected = {**pool_labels, **({rollout.LABEL_MIG_CONFIG: mig[0]} if mig else {})}
        assert doc["metadata"]["labels"] == expected, doc["metadata"]["name"]
        assert "spec" not in doc  # no cordon: nothing would ever uncordon a plain apply
        assert set(doc["metadata"]["annotations"]) == set(gitops.PRUNE_PROTECTION)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("mode", MODES)
def test_prune_protection_exactly_where_the_spec_retains(stack, mode):
    plan = _plan(stack)
    retained = {o.manifest["kind"] + "/" + o.manifest["metadata"]["name"] for o in plan.objects if o.retain_on_delete}
    assert any(k.startswith("Namespace/") for k in retained)
    texts = [render_documents(plan, mode)]
    if mode != "values":
        texts.append({f"doc{i}": t for i, t in enumerate(stream(plan, mode).split("---\n")[1:])})
    for documents in texts:
        docs = _objects(documents).values()
        protected = {d["kind"] + "/" + d["metadata"]["name"] for d in docs if gitops.FLUX_PRUNE in _ann(d)}
        assert protected == retained
        for d in docs:
            notes = {k: v for k, v in _ann(d).items() if k in gitops.PRUNE_PROTECTION}
            assert notes in ({}, gitops.PRUNE_PROTECTION), d["metadata"]["name"]


def _ann(doc: dict) -> dict:
    return doc["metadata"].get("annotations", {})


def test_a_dropped_tenants_namespace_is_protected_and_an_offboarded_ones_is_not(tmp_path):
    import shutil

    copy = tmp_path / "dev"
    shutil.copytree(ROOT / "stacks" / "dev", copy)
    tenant = copy / "tenants" / "research.yaml"
    data = yaml.safe_load(tenant.read_text())
    data["offboarded"] = True
    tenant.write_text(yaml.safe_dump(data))
    docs = _objects(render_documents(manifests.build(load_valid_spec(copy / "spec.yaml")), "helmrelease"))
    assert gitops.FLUX_PRUNE not in _ann(docs["tenant-research-ns.yaml"])
    assert _ann(docs["tenant-inference-ns.yaml"])[gitops.ARGO_SYNC_OPTIONS] == "Prune=false"


@pytest.mark.parametrize("mode", MODES)
def test_the_kustomization_names_every_object_file_in_apply_order(mode):
    documents = render_documents(_plan("dev"), mode)
    kustomization = yaml.safe_load(documents[gitops.KUSTOMIZATION_FILE])
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["resources"] == list(_objects(documents))
    assert "." not in gitops.KUSTOMIZATION_FILE  # kubectl apply -f DIR reads only *.yaml/*.yml/*.json


# The names kustomize recognises, in the order it tries them: sigs.k8s.io/kustomize/api v0.21.1 (the version
# fluxcd/kustomize-controller 186fb3b's go.mod pins), api/konfig/general.go lines 10-16. Flux's
# kustomize-controller generates before it builds (internal/controller/kustomization_controller.go lines
# 424-430 and 749: generator.NewGenerator(workDir, obj).WriteFile) with fluxcd/pkg kustomize/v1.39.0's
# findOrGenerateKustomization (kustomize/kustomize_generator.go): when one of these names is a file at the
# root of the Kustomization's path it builds from that file (lines 527-535); only when none is does it
# generate a kustomization.yaml listing every *.yaml/*.yml below the path (lines 537-569, scanManifests).
# kustomize itself refuses a directory holding two of the names (api/internal/target/kusttarget.go lines
# 101-121, "Found multiple kustomization files"). So render must write exactly one, at DIR's root.
KUSTOMIZE_FILE_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


@pytest.mark.parametrize("mode", MODES)
def test_the_kustomization_is_the_one_file_flux_and_kustomize_look_for_at_the_root(mode, tmp_path):
    documents = render_documents(_plan("dev"), mode)
    assert [n for n in documents if n in KUSTOMIZE_FILE_NAMES] == [gitops.KUSTOMIZATION_FILE]
    write(documents, tmp_path / "out")
    at_root = [n for n in KUSTOMIZE_FILE_NAMES if (tmp_path / "out" / n).is_file()]
    assert at_root == [gitops.KUSTOMIZATION_FILE]
