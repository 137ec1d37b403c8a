"""The real Pulumi program under mocks: what it registers, under which parents, with which options."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
from pathlib import Path

import pytest
import yaml

from components.program import PLATFORM_NAME
from gpupool.k8s import manifests
from gpupool.model import queues
from gpupool.rules.engine import load_valid_spec
from tests.pulumi_mocks import canonical, run_program, snapshot

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted(p.parent.name for p in (ROOT / "stacks").glob("*/spec.yaml"))
GOLDEN = ROOT / "tests" / "golden"
P = f"{PLATFORM_NAME}-"  # every child of the program's GpuPlatform is named after it


@pytest.fixture(autouse=True)
def _in_project_dir(monkeypatch):
    monkeypatch.chdir(ROOT)  # the program resolves the spec path like `pulumi up` does: from the project dir


def _run(stack: str):
    mocks, monitor, error = run_program({"spec": f"stacks/{stack}/spec.yaml"}, stack=stack)
    assert error is None, error
    return mocks, monitor


def test_bundled_stacks_exist():
    assert {"dev", "prod"} <= set(STACKS)


@pytest.mark.parametrize("stack", STACKS)
def test_golden_snapshot(stack):
    """Every registered (type, name, inputs): catches URN churn and value drift in review."""
    mocks, _ = _run(stack)
    actual = canonical(snapshot(mocks))
    golden = GOLDEN / f"{stack}.json"
    if os.environ.get("GPUPOOL_UPDATE_GOLDEN") or not golden.exists():
        golden.write_text(actual + "\n")
        if not os.environ.get("GPUPOOL_UPDATE_GOLDEN"):
            pytest.fail(f"wrote missing golden file {golden}; review and commit it")
    assert actual + "\n" == golden.read_text(), (
        f"registered resources differ from {golden} (GPUPOOL_UPDATE_GOLDEN=1 pytest ... to accept)"
    )


@pytest.mark.parametrize("stack", STACKS)
def test_every_kubernetes_resource_has_a_gpupool_component_parent(stack):
    _, monitor = _run(stack)
    k8s = {
        k: r
        for k, r in monitor.requests.items()
        if r["type"].startswith("kubernetes:") and not r["type"].startswith("pulumi:providers")
    }
    assert k8s
    for key, request in k8s.items():
        parent_type = request["parent"].split("::")[-2].split("$")[-1]
        assert parent_type.startswith("gpupool:"), f"{key} is parented to {request['parent']}"


@pytest.mark.parametrize("stack", STACKS)
def test_render_is_exactly_what_is_registered(stack):
    """One source of truth: the objects `gpupool render` writes are the inputs the components register.

    The component layer adds only Pulumi's own options: on Patch resources the provider's
    `pulumi.com/patchForce` annotation (components.k8s_objects.PATCH_ANNOTATIONS); registered minus exactly
    that is the rendered object, through gpupool.k8s.gitops.for_apply. The chart is a helm.v4.Chart whose values are the values of every
    rendered form (Flux HelmRelease, Argo CD Application, values file)."""
    from components.k8s_objects import PATCH_ANNOTATIONS
    from gpupool.k8s import gitops
    from gpupool.k8s.delivery import MODES, VALUES_FILE, values_file
    from gpupool.k8s.render import KUEUE_CONFIG_FILE, render_documents

    mocks, _ = _run(stack)
    registered = {a.name.removeprefix(P): a for a in mocks.created if a.custom}
    plan = manifests.build(load_valid_spec(f"stacks/{stack}/spec.yaml"))
    documents = render_documents(plan, "values")
    as_registered = []
    for obj in plan.objects:
        assert obj.name in registered, f"{obj.name} in the plan but not registered"
        inputs = json.loads(json.dumps(registered[obj.name].inputs))
        if obj.patch:
            # Pulumi's own: patchForce on every patch, every node patch's wait (tests/test_rollout*.py).
            from components.k8s_objects import pulumi_only_annotations

            pulumi_only = pulumi_only_annotations(obj)
            assert PATCH_ANNOTATIONS.items() <= pulumi_only.items(), obj.name
            annotations = inputs["metadata"].pop("annotations")
            rest = {k: v for k, v in annotations.items() if k not in pulumi_only}
            assert {k: v for k, v in annotations.items() if k in pulumi_only} == pulumi_only, obj.name
            if rest:
                inputs["metadata"]["annotations"] = rest
        as_registered.append(dataclasses.replace(obj, manifest=inputs))
    # Render is the registered objects through gitops.for_apply, the only two transforms for plain applies
    # (one Node document per node, prune protection where retained), plus the values file, the Kustomization and
    # (with queueing) Kueue's Configuration, which gpupool does not install.
    files = gitops.for_apply(as_registered)
    values_files = {values_file(c) for c in plan.charts()}
    extra = values_files | {gitops.KUSTOMIZATION_FILE} | ({KUEUE_CONFIG_FILE} if plan.queues else set())
    assert VALUES_FILE in values_files  # the operator's values keep the name docs and users know
    assert set(documents) == {f"{o.name}.yaml" for o in files} | extra
    for obj in files:
        rendered = yaml.safe_load(documents[f"{obj.name}.yaml"])
        assert obj.manifest == rendered, obj.name
        assert not any(k.startswith("pulumi.com/") for k in rendered["metadata"].get("annotations", {})), obj.name
    k8s_registered = {
        n
        for n, a in registered.items()
        if a.typ.startswith("kubernetes:")
        and not a.typ.startswith("pulumi:")
        and a.typ != "kubernetes:helm.sh/v4:Chart"
    }
    assert k8s_registered == {o.name for o in plan.objects}
    # Every release (the GPU Operator's; the DRA driver's where a pool uses DRA) carries the same values in
    # every form: what the component registers, the values file, the HelmRelease, the Application.
    charts = {a.name.removeprefix(P): a for a in mocks.created if a.typ == "kubernetes:helm.sh/v4:Chart"}
    assert sorted(charts) == sorted(c.name for c in plan.charts())
    for c in plan.charts():
        assert charts[c.name].inputs["values"] == yaml.safe_load(documents[values_file(c)]), c.name
    for mode in MODES:
        rendered = [yaml.safe_load(t) for t in render_documents(plan, mode).values()]
        carriers = [
            d["spec"]["values"]
            if d.get("kind") == "HelmRelease"
            else d["spec"]["source"]["helm"]["valuesObject"]
            if d.get("kind") == "Application"
            else d
            for d in rendered
            if d.get("kind") in ("HelmRelease", "Application") or "kind" not in d
        ]
        assert carriers == [charts[c.name].inputs["values"] for c in plan.charts()], mode


@pytest.mark.parametrize("stack", STACKS)
def test_every_gpu_quota_lists_every_advertised_resource(stack):
    spec = load_valid_spec(f"stacks/{stack}/spec.yaml")
    advertised = spec.advertised_resources()
    mocks, _ = _run(stack)
    quotas = [a for a in mocks.created if a.typ == "kubernetes:core/v1:ResourceQuota" and a.name.endswith("-gpu-quota")]
    assert len(quotas) == len(spec.tenants)
    for quota in quotas:
        hard = quota.inputs["spec"]["hard"]
        missing = [r for r in advertised if f"requests.{r}" not in hard]
        assert not missing, f"{quota.name} does not limit {missing}"
        tenant = next(t for t in spec.tenants if quota.name == f"{P}tenant-{t.name}-gpu-quota")
        for resource in advertised:
            want = 0 if tenant.offboarded else tenant.gpus.get(resource, 0)
            if spec.queueing is not None:
                # Under Kueue: the most it can admit (nominal + borrowing), never below the grant's nominal part.
                want = queues.max_admitted(spec, spec.queueing)[tenant.name].get(resource, 0)
                assert want >= queues.guaranteed(spec, tenant, resource)
            assert hard[f"requests.{resource}"] == str(want)


@pytest.mark.parametrize("stack", STACKS)
def test_no_limit_range_injects_gpus(stack):
    mocks, _ = _run(stack)
    ranges = [a for a in mocks.created if a.typ == "kubernetes:core/v1:LimitRange"]
    assert ranges
    for lr in ranges:
        for item in lr.inputs["spec"]["limits"]:
            for field in ("default", "defaultRequest", "max", "min", "maxLimitRequestRatio"):
                keys = [k for k in item.get(field, {}) if "nvidia.com" in k]
                assert not keys, f"{lr.name}.{field} would inject {keys} into every container"
            assert set(item["defaultRequest"]) == {"cpu", "memory"}
            # A default limit only where the spec names one: an injected limit refuses bigger requests.
            assert "default" not in item or set(item["default"]) <= {"cpu", "memory"}


@pytest.mark.parametrize("stack", STACKS)
def test_tenant_objects_are_retained_on_delete_unless_offboarded(stack):
    """Dropping a tenant file must not delete its namespace (nor lift its quota)."""
    spec = load_valid_spec(f"stacks/{stack}/spec.yaml")
    mocks, monitor = _run(stack)
    for tenant in spec.tenants:
        mine = [a for a in mocks.created if a.custom and a.name.startswith(f"{P}tenant-{tenant.name}-")]
        assert {a.typ.split(":")[-1] for a in mine} >= {"Namespace", "ResourceQuota", "LimitRange"}
        for a in mine:
            request = monitor.requests[f"{a.typ}::{a.name}"]
            # Not retained: the owners' RoleBinding (a replaced one must not keep granting its old role), the
            # per-pod maximum (removing it from the spec must remove its enforcement) and the priority-guard
            # quota (it leaves the spec when the tenant's tier becomes the top one, and kept it would refuse
            # that tier). The guard policy is retained: a removed tenant's namespace and workloads stay, and so
            # must its ceiling.
            admission = a.typ.startswith("kubernetes:admissionregistration.k8s.io") and "priority-guard" not in a.name
            guard_quota = a.name == f"{P}tenant-{tenant.name}-priority-guard"
            retained = not tenant.offboarded and not admission and not guard_quota and not a.typ.endswith("RoleBinding")
            assert bool(request["retainOnDelete"]) is retained, (tenant.name, a.name)


def test_prod_has_an_offboarded_tenant_whose_namespace_is_not_retained():
    spec = load_valid_spec("stacks/prod/spec.yaml")
    assert any(t.offboarded for t in spec.tenants)


@pytest.mark.parametrize("stack", STACKS)
def test_node_label_patches_are_retained_and_forced(stack):
    mocks, monitor = _run(stack)
    patches = [a for a in mocks.created if a.typ == "kubernetes:core/v1:NodePatch"]
    assert patches
    for patch in patches:
        assert monitor.requests[f"{patch.typ}::{patch.name}"]["retainOnDelete"] is True
        assert patch.inputs["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
        ignored = list(monitor.requests[f"{patch.typ}::{patch.name}"].get("ignoreChanges") or [])
        # What uncordon changes after the cordon's apply is not diffed: a later up must not re-apply it.
        # Nothing else: the cordon and uncordon are not refreshed (rollout.REFRESH_EXCLUDE), and an ignored marker
        # or waitFor made an upgraded stack apply the old release's wait (e2e test_upgrade).
        cordon = patch.name.endswith(("_cordon", "_rekey-cordon"))
        assert ignored == (["spec.unschedulable"] if cordon else []), patch.name
        if patch.name.endswith(("_cordon", "_uncordon")):
            continue  # a node's MIG rollout chain (tests/test_rollout.py)
        labels = patch.inputs["metadata"]["labels"]
        assert {"gpupool.dev/pool", "nvidia.com/device-plugin.config"} <= set(labels)


@pytest.mark.parametrize("stack", STACKS)
def test_tier_classes_are_replaced_delete_first_on_an_immutable_change(stack):
    """value and preemptionPolicy are immutable (kubernetes pkg/apis/scheduling/validation/validation.go) and
    pulumi-kubernetes lists no PriorityClass field to replace on (provider/pkg/provider/diff.go, forceNew): the
    engine replaces the class only because it is told to, deleting first (the name is the tier's)."""
    mocks, monitor = _run(stack)
    classes = [a for a in mocks.created if a.typ == "kubernetes:scheduling.k8s.io/v1:PriorityClass"]
    assert classes
    for pc in classes:
        request = monitor.requests[f"{pc.typ}::{pc.name}"]
        assert request["replaceOnChanges"] == ["value", "preemptionPolicy"], pc.name
        assert request["deleteBeforeReplace"] is True, pc.name
    others = [
        r for k, r in monitor.requests.items() if "PriorityClass" not in k and r["type"].startswith("kubernetes:")
    ]
    assert others and not any(r["replaceOnChanges"] or r["deleteBeforeReplace"] for r in others)


@pytest.mark.parametrize("stack", STACKS)
def test_mig_steps_are_dynamic_resources_that_rerun_only_on_a_new_config(stack):
    """Each rolled node's mig step (gpupool.k8s.mig_step) is a dynamic resource; its timeout is an input that a
    policy-only edit changes without running the step again (the provider's diff looks at node and config)."""
    from gpupool.deploy.mig_step_provider import MigStepProvider

    mocks, _ = _run(stack)
    steps = [a for a in mocks.created if a.name.endswith("_mig")]
    assert steps and all(a.typ == "pulumi-python:dynamic/gpupool:NodeMigStep" for a in steps)
    olds = dict(steps[0].inputs)
    provider = MigStepProvider()
    assert not provider.diff("n", olds, {**olds, "timeoutSeconds": olds["timeoutSeconds"] + 1}).changes
    assert provider.diff("n", olds, {**olds, "config": "another"}).changes
    # wholeNode (added for migRebootOnReconfigure) is a drain setting: a stack written before it reruns nothing.
    assert (
        "wholeNode" in olds
        and not provider.diff("n", {k: v for k, v in olds.items() if k != "wholeNode"}, olds).changes
    )
    # No node patch waits for MIG Manager or writes its state label: only the mig step does, where it waits.
    for a in mocks.created:
        if a.typ == "kubernetes:core/v1:NodePatch":
            assert "nvidia.com/mig.config.state" not in (a.inputs["metadata"].get("labels") or {}), a.name


def test_provider_updates_config_maps_in_place():
    mocks, _ = _run("dev")
    (provider,) = [a for a in mocks.created if a.typ == "pulumi:providers:kubernetes"]
    assert provider.inputs["enableConfigMapMutable"] == "true"


def test_chart_values_point_at_the_config_maps_and_use_mixed_strategy():
    mocks, _ = _run("dev")
    chart = next(a for a in mocks.created if a.typ == "kubernetes:helm.sh/v4:Chart")
    values = chart.inputs["values"]
    assert values["mig"]["strategy"] == "mixed"
    assert values["migManager"]["config"] == {"name": manifests.MIG_CONFIGMAP, "default": "all-disabled"}
    assert values["devicePlugin"]["config"] == {"name": manifests.PLUGIN_CONFIGMAP, "default": manifests.EXCLUSIVE_KEY}
    assert chart.inputs["version"] == "v26.7.0"
    assert chart.inputs["repositoryOpts"]["repo"] == "https://helm.ngc.nvidia.com/nvidia"


def test_local_chart_path_replaces_repository(tmp_path):
    chart_dir = tmp_path / "chart"
    chart_dir.mkdir()
    mocks, _, error = run_program({"spec": "stacks/dev/spec.yaml", "operatorChartPath": str(chart_dir)})
    assert error is None
    chart = next(a for a in mocks.created if a.typ == "kubernetes:helm.sh/v4:Chart")
    assert chart.inputs["chart"] == str(chart_dir)
    assert "repositoryOpts" not in chart.inputs


def test_invalid_spec_registers_nothing(tmp_path):
    bad = tmp_path / "spec.yaml"
    bad.write_text((ROOT / "stacks/dev/spec.yaml").read_text().replace("replicas: 4", "replicas: 1"))
    mocks, _, error = run_program({"spec": str(bad)})
    assert error is not None
    assert "errors in the spec" in str(error)
    assert mocks.created == []


def _spec_text_with(tmp_path, old: str, new: str) -> Path:
    src = ROOT / "stacks/dev"
    dst = tmp_path / "dev"
    (dst / "tenants").mkdir(parents=True)
    (dst / "spec.yaml").write_text((src / "spec.yaml").read_text().replace(old, new))
    for f in (src / "tenants").glob("*.yaml"):
        (dst / "tenants" / f.name).write_text(f.read_text())
    return dst / "spec.yaml"


def test_sharing_edit_changes_config_and_restarts_readers_through_the_operator(tmp_path):
    """A replicas edit changes the ConfigMap data and the hash env the operator puts on the device plugin."""
    before, _, _ = run_program({"spec": "stacks/dev/spec.yaml"})
    after, _, _ = run_program({"spec": str(_spec_text_with(tmp_path, "replicas: 4", "replicas: 6"))})
    pick = lambda ms, t, n: next(a for a in ms.created if a.typ == t and a.name == n)  # noqa: E731
    cm_before = pick(before, "kubernetes:core/v1:ConfigMap", f"{P}device-plugin-config").inputs["data"]
    cm_after = pick(after, "kubernetes:core/v1:ConfigMap", f"{P}device-plugin-config").inputs["data"]
    assert cm_before["l4-shared"] != cm_after["l4-shared"] and "replicas: 6" in cm_after["l4-shared"]
    env = lambda ms: pick(ms, "kubernetes:helm.sh/v4:Chart", f"{P}gpu-operator").inputs["values"]  # noqa: E731
    assert env(before)["devicePlugin"]["env"] != env(after)["devicePlugin"]["env"]
    assert env(before)["gfd"]["env"] != env(after)["gfd"]["env"]
    assert env(before)["migManager"]["env"] == env(after)["migManager"]["env"]  # MIG untouched: no MIG restart


def test_operand_env_is_only_gpupools_config_hash():
    """The operator merges env per variable into its own templates: gpupool passes only its hash."""
    mocks, _ = _run("dev")
    values = next(a for a in mocks.created if a.typ == "kubernetes:helm.sh/v4:Chart").inputs["values"]
    names = lambda operand: [e["name"] for e in values[operand]["env"]]  # noqa: E731
    assert names("devicePlugin") == [manifests.HASH_ENV_PLUGIN]
    assert names("gfd") == [manifests.HASH_ENV_PLUGIN]
    assert names("migManager") == [manifests.HASH_ENV_MIG]


@pytest.mark.parametrize("stack", STACKS)
def test_gpupool_sets_no_operator_managed_variable(stack):
    """DEVICE_LIST_STRATEGY and the other template defaults are the operator's (v26.7.0 facts)."""
    from gpupool.gpu.operator_facts import operator_managed_env

    managed = operator_managed_env()
    assert "DEVICE_LIST_STRATEGY" in managed["devicePlugin"]
    values = manifests.build(load_valid_spec(f"stacks/{stack}/spec.yaml")).chart.values
    for operand, names in managed.items():
        assert names, operand
        set_by_gpupool = {e["name"] for e in values[operand]["env"]} & set(names)
        assert not set_by_gpupool, (operand, set_by_gpupool)


def test_a_spec_env_list_is_kept_and_still_gets_the_hash(tmp_path):
    spec_text = (
        (ROOT / "stacks/dev/spec.yaml")
        .read_text()
        .replace(
            "    namespace: gpu-operator\n",
            "    namespace: gpu-operator\n    migRebootOnReconfigure: true\n    values:\n      devicePlugin:\n"
            "        env: [{name: DEVICE_LIST_STRATEGY, value: volume-mounts}]\n",
            1,
        )
    )
    spec_path = _spec_text_with(tmp_path, "", "")
    spec_path.write_text(spec_text)
    chart = manifests.build(load_valid_spec(spec_path)).chart.values
    assert chart["devicePlugin"]["env"][0] == {"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}
    assert [e["name"] for e in chart["devicePlugin"]["env"]] == ["DEVICE_LIST_STRATEGY", manifests.HASH_ENV_PLUGIN]
    assert chart["migManager"]["env"] == [
        {"name": manifests.HASH_ENV_MIG, "value": chart["migManager"]["env"][0]["value"]},
        {"name": "WITH_REBOOT", "value": "true"},
    ]


def _exported(stack: str, monkeypatch) -> dict:
    import pulumi

    exported: dict = {}
    monkeypatch.setattr(pulumi, "export", lambda key, value: exported.__setitem__(key, value))
    _run(stack)
    return exported


@pytest.mark.parametrize("stack", STACKS)
def test_stack_outputs_are_the_figures_of_gpupool_plan(stack, monkeypatch):
    """headroom, capacity, granted and allowed per resource: exactly what `gpupool plan -o json` reports."""
    from gpupool.cli.main import main

    exported = _exported(stack, monkeypatch)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", f"stacks/{stack}/spec.yaml", "-o", "json"]) == 0
    plan_json = json.loads(out.getvalue())
    lines = {r["resource"]: r for r in plan_json["resources"]}
    assert lines
    for figure in ("capacity", "granted", "allowed", "headroom"):
        assert exported[figure] == {r: line[figure] for r, line in lines.items()}, figure


def test_prod_headroom_follows_the_oversubscription_policy(monkeypatch):
    """The case that was wrong: prod promises 1.5x the shared replicas, so headroom is not capacity - granted."""
    exported = _exported("prod", monkeypatch)
    shared = "nvidia.com/gpu.shared"
    assert exported["headroom"][shared] == exported["allowed"][shared] - exported["granted"][shared]
    assert exported["allowed"][shared] > exported["capacity"][shared]
    assert exported["headroom"][shared] >= 0
