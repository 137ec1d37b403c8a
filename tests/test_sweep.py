"""The label sweep (gpupool.deploy.sweep) and the marks it reads (gpupool.k8s.desired.stamped): every object
gpupool registers names its platform; a retained one says so; the sweep removes only labelled objects that no
stack's desired set holds, that Pulumi wrote and that are neither retained nor a Namespace; the kinds it lists
cover every kind the builders make. (tests/e2e/test_sharding.py runs it against a real API server after a
killed checkpoint-free run.)"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

from gpupool.deploy import sweep
from gpupool.k8s import manifests
from gpupool.k8s.desired import ANNOTATION_RETAINED, LABEL_PLATFORM
from gpupool.rules.engine import load_valid_spec

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted(ROOT.glob("stacks/*/spec.yaml"))
# Specs with what the bundled stacks lack: Kueue's objects, monitoring's rules.
EXTRA = [p for p in ROOT.glob("tests/**/spec*.yaml") if "bad_specs" not in p.parts]


def _built(path: Path) -> list[manifests.Desired] | None:
    try:
        return manifests.build(load_valid_spec(path)).objects
    except BaseException:  # noqa: BLE001  # a deliberately broken fixture spec: not this test's
        return None


def test_every_kind_gpupool_registers_is_one_the_sweep_lists():
    seen: set[tuple[str, str, bool]] = set()
    for path in SPECS + EXTRA:
        for obj in _built(path) or []:
            if not obj.patch:
                seen.add((obj.manifest["apiVersion"], obj.kind, "namespace" in obj.manifest["metadata"]))
    listed = {(k.api_version, k.kind, k.namespaced) for k in sweep.KINDS}
    assert seen - listed == set()
    # the specs cover the families the sweep must know: tenants, tiers, Kueue, DRA, monitoring
    kinds = {k for _, k, _ in seen}
    assert {"RoleBinding", "PriorityClass", "LocalQueue", "DeviceClass", "PrometheusRule"} <= kinds, kinds


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.parent.name)
def test_every_registered_object_names_its_platform_and_a_retained_one_says_so(path):
    spec = load_valid_spec(path)
    objects = manifests.build(spec).objects
    patches = [o for o in objects if o.patch]
    assert patches, "a bundled stack patches its named nodes"
    for obj in objects:
        meta = obj.manifest["metadata"]
        if obj.patch:  # a Node is not gpupool's: it owns only its labels
            assert LABEL_PLATFORM not in (meta.get("labels") or {}), obj.name
            continue
        assert meta["labels"][LABEL_PLATFORM] == spec.cluster.name, obj.name
        assert (meta.get("annotations") or {}).get(ANNOTATION_RETAINED) == ("true" if obj.retain_on_delete else None)
    tenants = [o for o in objects if o.component.startswith("tenant:")]
    retained = {o.kind for o in tenants if o.retain_on_delete}
    assert {"Namespace", "ResourceQuota", "LimitRange"} <= retained and "RoleBinding" not in retained


# ---------------------------------------------------------------- deciding


def _kind(name: str) -> sweep.Kind:
    return next(k for k in sweep.KINDS if k.kind == name)


def _found(kind: str, ns: str, name: str, retained: bool = False, by_pulumi: bool = True) -> sweep.Found:
    return sweep.Found(_kind(kind), ns, name, f"uid-{name}", retained, by_pulumi)


def test_only_unwanted_unretained_objects_pulumi_wrote_go_and_a_namespace_never():
    desired = {
        ("", "ResourceQuota", "team-a", "gpu-quota"),
        ("rbac.authorization.k8s.io", "RoleBinding", "team-a", "o"),
    }
    found = [
        _found("ResourceQuota", "team-a", "gpu-quota"),  # wanted
        _found("RoleBinding", "team-a", "o"),  # wanted
        _found("RoleBinding", "team-b", "o"),  # a removed tenant's binding: goes
        _found("ValidatingAdmissionPolicy", "", "gpupool-max-per-pod.team-b"),  # goes
        _found("ResourceQuota", "team-b", "gpu-quota", retained=True),  # stays, counted
        _found("Namespace", "", "team-b", retained=True),  # stays, counted
        _found("Namespace", "", "team-c"),  # stays, named
        _found("ConfigMap", "team-a", "copied-label", by_pulumi=False),  # a tenant's own: stays, named
    ]
    result = sweep.orphans(found, desired)
    assert [str(f) for f in result.removed] == [
        "ValidatingAdmissionPolicy gpupool-max-per-pod.team-b",
        "RoleBinding team-b/o",
    ]
    assert [(str(f), why.split(" ")[0]) for f, why in result.left] == [
        ("ConfigMap team-a/copied-label", "no"),
        ("Namespace team-c", "a"),
    ]
    assert result.retained == 2
    note = result.note()
    assert "removed what no stack holds: ValidatingAdmissionPolicy" in note and "2 retained on delete" in note
    assert "kubectl delete namespace team-c" in note


def test_a_wanted_object_is_matched_whatever_version_it_is_listed_in():
    plan = manifests.build(load_valid_spec(ROOT / "stacks" / "dev" / "spec.yaml"))
    keys = sweep.desired_keys(plan.objects)
    quota = next(o for o in plan.objects if o.kind == "ResourceQuota")
    assert sweep.key_of(quota) in keys
    assert not any(k[1] == "Node" for k in keys)  # patches are never the sweep's


# ---------------------------------------------------------------- against an API


class FakeApi:
    """Lists by label selector with pages of PAGE, deletes with a uid precondition (404, 409 as the API
    server answers: staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go Delete checks
    preconditions and answers Conflict on a uid mismatch)."""

    def __init__(self, objects: dict[str, list[dict]], page: int = 2, missing: tuple[str, ...] = ()):
        self.objects, self.page, self.missing = objects, page, missing
        self.calls: list[tuple[str, str, dict | None]] = []

    def __call__(self, method, path, body=None):
        self.calls.append((method, path, body))
        url = urllib.parse.urlsplit(path)
        parts = url.path.strip("/").split("/")
        plural = parts[-1] if method == "GET" else parts[-2]
        if plural in self.missing:
            return 404, {"kind": "Status"}
        items = self.objects.get(plural, [])
        if method == "GET":
            q = dict(urllib.parse.parse_qsl(url.query))
            key, _, value = q["labelSelector"].partition("=")
            match = [i for i in items if i["metadata"].get("labels", {}).get(key) == value]
            start = int(q.get("continue") or 0)
            rest = start + self.page
            cont = str(rest) if rest < len(match) else ""
            return 200, {"items": match[start:rest], "metadata": {"continue": cont}}
        name = parts[-1]
        ns = parts[parts.index("namespaces") + 1] if "namespaces" in parts else ""
        for i in items:
            m = i["metadata"]
            if m["name"] == name and m.get("namespace", "") == ns:
                if m["uid"] != body["preconditions"]["uid"]:
                    return 409, {}
                items.remove(i)
                return 200, {}
        return 404, {}


def _obj(ns: str, name: str, platform: str = "dev", retained: bool = False, manager: str = "pulumi-kubernetes-a1b2"):
    meta = {
        "name": name,
        "uid": f"uid-{name}",
        "labels": {LABEL_PLATFORM: platform},
        "managedFields": [{"manager": manager}],
    }
    if ns:
        meta["namespace"] = ns
    if retained:
        meta["annotations"] = {ANNOTATION_RETAINED: "true"}
    return {"metadata": meta}


def test_the_sweep_pages_through_lists_skips_unserved_kinds_and_deletes_by_uid():
    bindings = [_obj(f"team-{i}", "tenant-owners") for i in range(5)] + [_obj("other", "x", platform="prod")]
    api = FakeApi({"rolebindings": bindings}, page=2, missing=("localqueues", "clusterqueues"))
    wanted = manifests.Desired(
        "tenant:team-0",
        "team-0-owners",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"namespace": "team-0", "name": "tenant-owners"},
        },
    )
    result = sweep.sweep(api, "dev", [wanted])
    assert sorted(str(f) for f in result.removed) == [f"RoleBinding team-{i}/tenant-owners" for i in range(1, 5)]
    assert [b["metadata"]["namespace"] for b in bindings] == ["team-0", "other"]  # another platform's stays
    gets = [p for m, p, _ in api.calls if m == "GET" and "/rolebindings?" in p]
    assert len(gets) == 3 and "continue=2" in gets[1] and "continue=4" in gets[2]
    deletes = [(p, b) for m, p, b in api.calls if m == "DELETE"]
    assert deletes[0][0] == "/apis/rbac.authorization.k8s.io/v1/namespaces/team-1/rolebindings/tenant-owners"
    assert deletes[0][1]["preconditions"] == {"uid": "uid-tenant-owners"}


def test_an_object_made_again_since_the_listing_is_not_deleted():
    quotas = [_obj("team-1", "gpu-quota")]
    api = FakeApi({"resourcequotas": quotas})
    real = api.__call__

    def remade(method, path, body=None):  # between the list and the delete, someone made it again
        if method == "DELETE":
            quotas[0]["metadata"]["uid"] = "uid-new"
        return real(method, path, body)

    result = sweep.sweep(remade, "dev", [])
    assert result.removed == [] and len(quotas) == 1


def test_a_list_the_server_refuses_is_an_error_that_names_it():
    def refusing(method, path, body=None):
        return 403, {"kind": "Status", "message": "forbidden"}

    with pytest.raises(
        sweep.SweepError, match=r"listing namespaces labelled gpupool.dev/platform=dev answered HTTP 403"
    ):
        sweep.sweep(refusing, "dev", [])


def test_a_name_is_quoted_in_the_path_and_shown_printable():
    found = _found("RoleBinding", "team-a", "a/b\x1b[31m")
    path = found.kind.object_path(found.namespace, found.name)
    assert path.endswith("/rolebindings/a%2Fb%1B%5B31m")
    assert "\x1b" not in str(found)
    assert json.dumps(str(found))


def test_after_a_destroy_nothing_is_wanted_and_only_retained_objects_and_namespaces_stay(monkeypatch):
    from gpupool.k8s import kubeclient

    spec = load_valid_spec(ROOT / "stacks" / "dev" / "spec.yaml")
    objects = {
        "rolebindings": [_obj("research", "tenant-owners-edit")],  # a killed run's, never recorded
        "resourcequotas": [_obj("research", "gpu-quota", retained=True)],
        "namespaces": [_obj("", "research", retained=True), _obj("", "scratch")],
    }
    api = FakeApi(objects)
    monkeypatch.setattr(kubeclient, "Client", lambda *a, **k: api)
    result = sweep.for_spec(spec, None, None, wanted=False)
    assert [str(f) for f in result.removed] == ["RoleBinding research/tenant-owners-edit"]
    assert result.retained == 2 and [str(f) for f, _ in result.left] == ["Namespace scratch"]
    wanted = sweep.for_spec(spec, None, None)  # an up wants the spec's objects: the quota and namespace again
    assert wanted.removed == [] and wanted.retained == 0
