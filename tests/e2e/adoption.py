"""What "adopted" means (docs/explanation/create-semantics.md), shared by the e2e tests of issue 18's create semantics:
test_cli_path.py (namespaces made with kubectl before the first up; the up after destroy) and
test_crash_safety.py (the rerun after a killed up, whose landed create never reached the state).

An object that existed before an `up` is adopted when, after that up: it is in the Pulumi state with
gpupool's labels, as the very object that existed (the same ``metadata.uid``, in the cluster and in the
state: nothing was deleted and created again), and the provider the engine created it through carries
gpupool's provider settings exactly as the program sets them (components/provider.py ``REQUIRED``).

What this can prove with the toolchain's provider (toolchain/README.md, "The provider and create semantics"):
that the user's path (CLI, language host, ``__main__.py``, components) registers its objects through a
provider whose configuration, as the engine stored it, holds ``upsertExistingObjects: "true"``, and that
with it the adopting up converges without a replacement. It cannot prove the released 4.34.2's behaviour:
the provider built here predates pulumi-kubernetes #4278 and upserts whatever the setting says, so the same
run without the setting would pass here too. That with the setting 4.34.2 upserts, and without it fails
with AlreadyExists, rests on its source (provider/pkg/await/await.go ``Creation``), not on these tests.
"""

from __future__ import annotations

import json
from pathlib import Path

from components.provider import REQUIRED
from gpupool.k8s import manifests
from gpupool.rules.engine import load_valid_spec

from .cluster import ControlPlane

NAMESPACE_TYPE = "kubernetes:core/v1:Namespace"
PROVIDER_TYPE = "pulumi:providers:kubernetes"


def namespace_uids(cluster: ControlPlane, names) -> dict[str, str]:
    """name -> metadata.uid of the live namespaces among NAMES."""
    wanted = set(names)
    items = cluster.get_json("namespaces", timeout=120)["items"]
    return {i["metadata"]["name"]: i["metadata"]["uid"] for i in items if i["metadata"]["name"] in wanted}


def desired_namespace_labels(spec: Path) -> dict[str, dict[str, str]]:
    """namespace -> the labels gpupool's plan gives it (the same objects the components register)."""
    plan = manifests.build(load_valid_spec(spec))
    return {
        o.manifest["metadata"]["name"]: o.manifest["metadata"].get("labels", {})
        for o in plan.objects
        if o.manifest["kind"] == "Namespace" and not o.patch
    }


def provider_settings_as_the_program_sets_them() -> dict[str, str]:
    """config key -> value as the engine stores it: the SDK sends each setting through pulumi.runtime.to_json
    (pulumi_kubernetes/provider.py), i.e. JSON, so True is stored as the string "true"."""
    return {config_key: json.dumps(value) for value, config_key, _ in REQUIRED.values()}


def state_provider(deployment: dict) -> tuple[str, dict]:
    """(reference ``urn::id``, inputs) of the stack's one kubernetes provider."""
    providers = [r for r in deployment["deployment"]["resources"] if r["type"] == PROVIDER_TYPE and not r.get("delete")]
    assert len(providers) == 1, [p["urn"] for p in providers]
    (p,) = providers
    return f"{p['urn']}::{p['id']}", p.get("inputs") or {}


def assert_provider_as_users_have_it(deployment: dict) -> str:
    """The state's provider carries every setting gpupool needs, exactly as the program sets it. Returns its
    reference (what each resource's ``provider`` field names)."""
    ref, inputs = state_provider(deployment)
    wanted = provider_settings_as_the_program_sets_them()
    assert wanted["upsertExistingObjects"] == "true", wanted
    got = {k: inputs.get(k) for k in wanted}
    assert got == wanted, {"state's provider": got, "the program sets": wanted}
    return ref


def assert_adopted(deployment: dict, cluster: ControlPlane, before: dict[str, str], spec: Path) -> None:
    """Each namespace of BEFORE (name -> the uid it had before the up) is the same live object, in the state
    with gpupool's labels, created through the provider that carries gpupool's settings."""
    provider = assert_provider_as_users_have_it(deployment)
    assert before, "no namespace to check"
    assert namespace_uids(cluster, before) == before, "a namespace was deleted and created again (or is gone)"
    labels = desired_namespace_labels(spec)
    in_state = {
        r["outputs"]["metadata"]["name"]: r
        for r in deployment["deployment"]["resources"]
        if r["type"] == NAMESPACE_TYPE and not r.get("delete") and r.get("outputs")
    }
    live = {i["metadata"]["name"]: i for i in cluster.get_json("namespaces", timeout=120)["items"]}
    for name, uid in before.items():
        assert name in in_state, f"namespace {name} is not in the state: not adopted"
        r = in_state[name]
        meta = r["outputs"]["metadata"]
        assert meta.get("uid") == uid, (name, "the state records another object", meta.get("uid"), uid)
        assert r.get("provider") == provider, (name, r.get("provider"), provider)
        want = labels[name]
        assert want and want.items() <= (meta.get("labels") or {}).items(), (name, "state labels", meta.get("labels"))
        got = live[name]["metadata"].get("labels") or {}
        assert want.items() <= got.items(), (name, "live labels", got)
        assert live[name]["status"]["phase"] == "Active", (name, live[name]["status"])
        assert not live[name]["metadata"].get("deletionTimestamp"), name
