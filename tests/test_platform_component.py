"""gpupool.pulumi.GpuPlatform as a team composes it into its own program (under Pulumi's mocks):
child names prefixed by the platform's name, the caller's provider on every object, the provider settings
gpupool needs checked, typed outputs, two platforms in one program, and the aliases that carry a stack of
gpupool 0.1's program (unprefixed names at the stack's root, provider `k8s`) over without a replace."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pulumi
import pytest

from tests.pulumi_mocks import run_program

ROOT = Path(__file__).resolve().parent.parent
DEV = str(ROOT / "stacks" / "dev" / "spec.yaml")
PROD = str(ROOT / "stacks" / "prod" / "spec.yaml")


def _k8s(monitor) -> dict[str, dict]:
    return {
        k: r
        for k, r in monitor.requests.items()
        if r["type"].startswith("kubernetes:") and not r["type"].startswith("pulumi:providers")
    }


def test_two_platforms_in_one_program_on_the_callers_providers():
    from gpupool.pulumi import GpuPlatform, GpuPlatformArgs, kubernetes_provider

    seen: dict = {}

    def program():
        east = kubernetes_provider("east", context="east")
        west = kubernetes_provider("west", context="west")
        a = GpuPlatform("east", GpuPlatformArgs(spec=DEV), opts=pulumi.ResourceOptions(provider=east))
        b = GpuPlatform("west", GpuPlatformArgs(spec=PROD), opts=pulumi.ResourceOptions(providers=[west]))
        seen.update(a=a, b=b)

    mocks, monitor, error = run_program({}, program=program)
    assert error is None, error
    urns = Counter(r["urn"] for r in monitor.requests.values())
    assert max(urns.values()) == 1
    k8s = _k8s(monitor)
    assert k8s
    for request in k8s.values():
        name = request["urn"].rsplit("::", 1)[1]
        platform = name.split("-", 1)[0]
        assert platform in ("east", "west"), name
        if request["type"] != "kubernetes:helm.sh/v4:Chart":
            assert request["provider"].split("::")[-2] == platform, (name, request["provider"])
    # no provider of gpupool's own when the caller gives one
    assert sorted(a.name for a in mocks.created if a.typ == "pulumi:providers:kubernetes") == ["east", "west"]
    assert seen["a"].node_pools.keys() == {"l4-shared", "a100-mig"}
    assert seen["a"].operator is not None and seen["a"].outputs["headroom"]


def test_a_provider_gpupool_did_not_make_is_refused_before_anything_is_registered():
    import pulumi_kubernetes as k8s

    from gpupool.pulumi import GpuPlatform, GpuPlatformArgs

    def program():
        plain = k8s.Provider("plain")
        GpuPlatform("gpu", GpuPlatformArgs(spec=DEV), opts=pulumi.ResourceOptions(provider=plain))

    mocks, _, error = run_program({}, program=program)
    assert error is not None and "upsertExistingObjects" in str(error) and "GpuPlatform gpu" in str(error)
    assert [a.typ for a in mocks.created] == ["pulumi:providers:kubernetes"]  # nothing of the platform


def test_the_platforms_own_provider_has_the_settings_and_a_prefixed_name():
    mocks, monitor, error = run_program({"spec": DEV})
    assert error is None, error
    (provider,) = [a for a in mocks.created if a.typ == "pulumi:providers:kubernetes"]
    assert provider.name == "gpupool-k8s"
    assert provider.inputs["enableConfigMapMutable"] == provider.inputs["upsertExistingObjects"] == "true"
    assert all(r["urn"].rsplit("::", 1)[1].startswith("gpupool") for r in monitor.requests.values())


def test_typed_outputs_are_the_plan_figures():
    from gpupool.analysis import plan as capacity_plan
    from gpupool.pulumi import GpuPlatform, GpuPlatformArgs
    from gpupool.rules.engine import load_valid_spec

    got: dict = {}

    def program():
        platform = GpuPlatform("gpu", GpuPlatformArgs(spec=DEV))
        platform.headroom.apply(lambda v: got.setdefault("headroom", v))
        platform.tenants.apply(lambda v: got.setdefault("tenants", v))

    _, _, error = run_program({}, program=program, preview=False)
    assert error is None, error
    want = {r.resource: r.headroom for r in capacity_plan.compute(load_valid_spec(DEV)).resources}
    assert got["headroom"] == want
    assert set(got["tenants"]) == {t.name for t in load_valid_spec(DEV).tenants}


def _legacy_urns(stack: str) -> set[str]:
    """The URNs gpupool 0.1's program gave the bundled stack's resources, from the golden snapshot of that
    release (git show): (type, name) of each, under the component that held it."""
    old = json.loads(
        subprocess.run(
            ["git", "show", f"b4e5e3d:tests/golden/{stack}.json"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    )
    return {(r["type"], r["name"]) for r in old}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_legacy_aliases_name_every_resource_of_the_0_1_program(stack):
    """Every resource the 0.1 program registered is the alias of exactly one resource now, so an upgraded
    stack renames in its state instead of deleting and creating (the real engine proves it in
    tests/e2e/test_upgrade.py)."""
    try:
        old = _legacy_urns(stack)
    except subprocess.CalledProcessError:
        pytest.skip("no git history (a source tarball)")
    _, monitor, error = run_program({"spec": f"stacks/{stack}/spec.yaml"}, stack=stack)
    assert error is None, error
    aliased = Counter()
    for request in monitor.requests.values():
        for urn in request["aliases"]:
            chain, name = urn.split("::")[2:4]
            aliased[(chain.split("$")[-1], name)] += 1
            assert urn.startswith(f"urn:pulumi:{stack}::gpupool::")
    assert max(aliased.values()) == 1
    # every 0.1 resource is aliased (resources added since, e.g. monitoring, are aliased to their unprefixed
    # names on main before GpuPlatform too)
    # ... except the node patches of the MIG chain that the mig step replaced (gpupool.k8s.rollout): retained on
    # delete, so dropping them from the state leaves every node as it is.
    retired = {(t, n) for t, n in old if t == "kubernetes:core/v1:NodePatch" and n.endswith(("_mig", "_mig-check"))}
    assert old - retired <= set(aliased), old - retired - set(aliased)
