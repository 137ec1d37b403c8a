"""Property: over generated valid specs, every name gpupool derives is unique per kind and valid, and
render and plan never crash.

The generator leans on the names that collided before: pools named like the device-plugin default key
("exclusive"), pool/node names whose concatenations coincide (pool "a-b" + node "c", pool "a" + node "b-c"),
node names up to the 253 characters Kubernetes allows, per-GPU MIG layouts whose readable names coincide,
and whole numbers written as floats (4.0).
"""

from __future__ import annotations

import re

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.analysis import plan as planning
from gpupool.k8s import delivery, gpu_configs, manifests, render
from gpupool.present import plan as present_plan
from gpupool.rules.engine import validate_file

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _label(max_size: int = 12):
    return st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,%d}[a-z0-9])?\Z" % max(0, max_size - 2), fullmatch=True)  # noqa: UP031 (braces of the regex)


TRICKY_POOLS = ["exclusive", "default", "a", "a-b", "b", "b-c", "all-disabled", "exclusive-default"]
TRICKY_NODES = ["c", "b-c", "b.c", "a", "exclusive.default"]


@st.composite
def node_names(draw):
    kind = draw(st.sampled_from(["tricky", "short", "long"]))
    if kind == "tricky":
        return draw(st.sampled_from(TRICKY_NODES))
    if kind == "short":
        return draw(_label(20))
    parts = draw(
        st.lists(st.sampled_from(["n" * 63, "node-" + "x" * 50, "zone-a", "cluster", "local"]), min_size=2, max_size=4)
    )
    return ".".join(parts)[:253].strip(".-") or "n"


A100_PROFILES = {"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2, "7g.80gb": 1}


@st.composite
def sharing(draw, gpus: int):
    kind = draw(st.sampled_from(["whole", "time-sliced", "mps", "mig-preset", "mig-layout", "mig-per-gpu"]))
    if kind == "whole":
        return "L4", None
    if kind in ("time-sliced", "mps"):
        key = "timeSlicing" if kind == "time-sliced" else "mps"
        return "L4", {key: {"replicas": draw(st.integers(2, 8))}}
    if kind == "mig-preset":
        return "A100-80GB", {"mig": {"preset": draw(st.sampled_from(["all-1g.10gb", "all-balanced", "all-3g.40gb"]))}}
    if kind == "mig-layout":
        profile = draw(st.sampled_from(sorted(A100_PROFILES)))
        return "A100-80GB", {"mig": {"layout": {profile: draw(st.integers(1, A100_PROFILES[profile]))}}}
    indices = list(range(gpus))
    split = draw(st.integers(1, gpus))
    first, rest = indices[:split], indices[split:]
    order = draw(st.permutations(indices))
    first, rest = sorted(order[:split]), sorted(order[split:])
    groups = [{"gpus": first, "preset": "all-1g.10gb"}]
    if rest:
        groups.append({"gpus": rest, "layout": {"3g.40gb": 2}})
    return "A100-80GB", {"mig": {"perGpu": groups}}


@st.composite
def specs(draw):
    pool_names = draw(
        st.lists(st.one_of(st.sampled_from(TRICKY_POOLS), _label(20)), min_size=1, max_size=4, unique=True)
    )
    used_nodes: set[str] = set()
    pools = []
    for i, name in enumerate(pool_names):
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        model, share = draw(sharing(gpus))
        pool: dict = {"name": name, "gpu": model, "gpusPerNode": float(gpus) if draw(st.booleans()) else gpus}
        if draw(st.booleans()):
            nodes = [
                n for n in draw(st.lists(node_names(), min_size=1, max_size=3, unique=True)) if n not in used_nodes
            ]
            nodes = nodes or [f"fallback-{i}"]
            used_nodes.update(nodes)
            pool["nodes"] = nodes
        else:
            pool["nodeSelector"] = {"example.com/group": f"g{i}"}  # disjoint by construction
            pool["nodeCount"] = draw(st.integers(1, 3))
        if share:
            pool["sharing"] = share
        pools.append(pool)
    tiers = [{"name": "high", "priority": 1000}, {"name": "low", "priority": 10}]
    tenant_names = draw(
        st.lists(
            st.one_of(st.sampled_from(["exclusive", "a", "a-b", "pool-a", "tenant-x"]), _label(30)),
            max_size=4,
            unique=True,
        )
    )
    tenants = [
        {
            "name": n,
            "tier": draw(st.sampled_from(["high", "low"])),
            "owners": [draw(st.sampled_from(["team", "group:oidc:team", "serviceaccount:ci:deployer"]))],
            "ownerRole": draw(st.sampled_from(["admin", "edit", "view"])),
        }
        for n in tenant_names
    ]
    mixed = any("mig" in (p.get("sharing") or {}) for p in pools) or not any(
        "mps" in (p.get("sharing") or {}) for p in pools
    )
    if not mixed:
        cluster = {"name": "prop", "migStrategy": "none"}
    else:
        cluster = {"name": "prop"}
        for p in pools:  # MPS needs migStrategy none; keep mixed and time-slice instead
            if "mps" in (p.get("sharing") or {}):
                p["sharing"] = {"timeSlicing": p["sharing"]["mps"]}
    return {
        "apiVersion": "gpupool.dev/v1alpha1",
        "kind": "GpuPlatform",
        "cluster": cluster,
        "nodePools": pools,
        "tiers": tiers,
        "tenants": tenants,
        "oversubscription": {"maxRatio": 2.0},
    }


def _labels_valid(labels: dict) -> None:
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        assert not prefix or (len(prefix) <= 253 and DNS_SUBDOMAIN.match(prefix)), key
        assert len(name) <= 63 and LABEL_NAME.match(name), key
        assert len(value) <= 63 and LABEL_VALUE.match(value), (key, value)


def check_derived_names(plan: manifests.DesiredObjects) -> None:
    names = [o.name for o in plan.objects]
    assert len(names) == len(set(names)), "Pulumi resource names collide"
    for mode in delivery.MODES:
        rendered = render.objects(plan, mode)
        files = render.render_documents(plan, mode)
        own = [render.file_name(o) for o in rendered]
        assert len(set(own)) == len(own) and set(own) <= set(files), f"two objects render to one file ({mode})"
        assert len({f.lower() for f in files}) == len(files), "file names collide on a case-insensitive file system"
        for f in files:
            assert "\0" not in f and all(0 < len(part.encode()) <= 255 for part in f.split("/")), f
    identities = set()
    for obj in plan.objects:
        meta = obj.manifest["metadata"]
        identity = (obj.manifest["apiVersion"], obj.kind, meta.get("namespace"), meta["name"])
        if not obj.patch:  # several patches may own different fields of one node (the MIG rollout's chain)
            assert identity not in identities, f"two desired objects are the same Kubernetes object: {identity}"
            identities.add(identity)
        pattern = DNS_LABEL if obj.kind == "Namespace" else DNS_SUBDOMAIN
        limit = 63 if obj.kind == "Namespace" else 253
        assert pattern.match(meta["name"]) and len(meta["name"]) <= limit, (obj.kind, meta["name"])
        _labels_valid(meta.get("labels", {}))
        if obj.kind == "ConfigMap":
            assert all(CONFIGMAP_KEY.match(k) and len(k) <= 253 for k in obj.manifest["data"]), obj.manifest["data"]
    plugin = next(o for o in plan.objects if o.name == "device-plugin-config").manifest["data"]
    mig = yaml.safe_load(next(o for o in plan.objects if o.name == "mig-config").manifest["data"]["config.yaml"])
    plugin_keys, mig_names = {}, {}
    for pool, config in plan.pool_configs.items():
        key = config.device_plugin
        assert key in plugin, (pool, key)
        plugin_keys.setdefault(key, set()).add(pool)
        if config.mig:
            assert config.mig in mig["mig-configs"], (pool, config.mig)
            mig_names.setdefault(config.mig, set()).add(pool)
    # A shared pool's key is its own (its name, or for MPS its name cut to fit plus "." and its config's hash:
    # manifests.mps_config_key); only unshared pools share the default key.
    for key, pools in plugin_keys.items():
        own = len(pools) == 1 and (pools == {key} or next(iter(pools)).startswith(key.partition(".")[0]))
        assert key == manifests.EXCLUSIVE_KEY or own, (key, pools)
        assert len(key) <= 63, key  # a node label value
        if key == manifests.EXCLUSIVE_KEY:
            assert "sharing" not in yaml.safe_load(plugin[key])
    for labels in plan.node_group_labels.values():
        _labels_valid(labels)


def _mig_entries_by_name(spec, plan) -> None:
    """One MIG config name means one layout: pools that share a name have identical mig-parted entries."""
    by_name: dict[str, list] = {}
    for pool in spec.pools:
        if pool.sharing.mig:
            entries = gpu_configs._mig_entries(pool)
            by_name.setdefault(plan.pool_configs[pool.name].mig, []).append(entries)
    for name, entries in by_name.items():
        assert all(e == entries[0] for e in entries), f"MIG config {name} stands for two layouts"


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(data=specs())
def test_derived_names_are_unique_and_valid_and_render_and_plan_never_crash(tmp_path_factory, data):
    directory = tmp_path_factory.mktemp("prop")
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = validate_file(path, cwd=directory)
    errors = [d.render() for d in result.report.errors]
    assert result.ok, errors
    plan = manifests.build(result.spec)
    check_derived_names(plan)
    _mig_entries_by_name(result.spec, plan)
    capacity = planning.compute(result.spec)
    for fmt in (
        present_plan.format_table,
        present_plan.format_markdown,
        present_plan.format_json,
        present_plan.format_csv,
    ):
        assert fmt(capacity)
    documents = render.render_documents(plan)
    written = render.write(documents, directory / "out")
    assert len(written) == len(documents)


def test_names_that_collided_before_are_distinct(tmp_path):
    """pool "a-b" + node "c" and pool "a" + node "b-c" gave one Pulumi name; a pool named "exclusive" took
    over the default device-plugin key; a 253-character node name crashed render on its file name."""
    long_node = ".".join(["n" * 63] * 4)[:253]
    data = {
        "apiVersion": "gpupool.dev/v1alpha1",
        "kind": "GpuPlatform",
        "cluster": {"name": "c"},
        "nodePools": [
            {"name": "a-b", "gpu": "L4", "gpusPerNode": 1, "nodes": ["c"]},
            {"name": "a", "gpu": "L4", "gpusPerNode": 1, "nodes": ["b-c", long_node]},
            {
                "name": "exclusive",
                "gpu": "L4",
                "gpusPerNode": 4,
                "nodes": ["n1"],
                "sharing": {"timeSlicing": {"replicas": 4}},
            },
        ],
        "tiers": [{"name": "t", "priority": 1}],
        "tenants": [{"name": "x", "tier": "t", "owners": ["g"], "gpus": {"nvidia.com/gpu": 3}}],
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    result = validate_file(path, cwd=tmp_path)
    assert result.ok, [d.render() for d in result.report.diagnostics]
    plan = manifests.build(result.spec)
    check_derived_names(plan)
    patches = sorted(o.name for o in plan.objects if o.kind == "Node")
    assert "pool-a-b.c" in patches and "pool-a.b-c" in patches
    assert plan.pool_configs["a"].device_plugin == manifests.EXCLUSIVE_KEY
    assert plan.pool_configs["exclusive"].device_plugin == "exclusive"
    documents = render.render_documents(plan)
    render.write(documents, tmp_path / "out")
    from gpupool.k8s.gitops import KUSTOMIZATION_FILE

    written = {str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.yaml")}
    assert written | {KUSTOMIZATION_FILE} == set(documents)


def test_per_gpu_layouts_with_the_same_readable_name_get_different_config_names(tmp_path):
    """GPUs {0,1,2,5} and {0,2,3,4,5} both read "0-2-5" once "+" is made label-safe."""

    def pool(name, first):
        rest = [i for i in range(8) if i not in first]
        return {
            "name": name,
            "gpu": "A100-80GB",
            "gpusPerNode": 8,
            "nodes": [f"{name}-1"],
            "sharing": {
                "mig": {"perGpu": [{"gpus": first, "preset": "all-1g.10gb"}, {"gpus": rest, "layout": {"3g.40gb": 2}}]}
            },
        }

    data = {
        "apiVersion": "gpupool.dev/v1alpha1",
        "kind": "GpuPlatform",
        "cluster": {"name": "c"},
        "nodePools": [pool("p", [0, 1, 2, 5]), pool("q", [0, 2, 3, 4, 5])],
        "tiers": [{"name": "t", "priority": 1}],
        "tenants": [{"name": "x", "tier": "t", "owners": ["g"], "gpus": {"nvidia.com/mig-1g.10gb": 1}}],
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    result = validate_file(path, cwd=tmp_path)
    assert result.ok, [d.render() for d in result.report.diagnostics]
    plan = manifests.build(result.spec)
    assert plan.pool_configs["p"].mig != plan.pool_configs["q"].mig
    _mig_entries_by_name(result.spec, plan)
    check_derived_names(plan)
