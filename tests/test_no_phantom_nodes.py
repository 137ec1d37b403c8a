"""gpupool never creates a Node (issue 41 item 3): a node the spec names that the cluster lacks is a warning in a
preview and stops an update before any Kubernetes object is registered, naming the node and its pool; a label
patch (server-side apply) of it would create it. The decision runs on a fake API here; the program under
Pulumi's mocks with a fake reader."""

from __future__ import annotations

import pulumi
import pytest

from components import live_nodes
from gpupool.k8s import manifests, named_nodes
from gpupool.rules.engine import validate_file
from tests.pulumi_mocks import run_program
from tests.test_program import ROOT


def _load(stack: str):
    result = validate_file(str(ROOT / "stacks" / stack / "spec.yaml"))
    assert result.spec is not None
    return result.spec


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_node_the_plan_patches_is_a_named_node_and_selector_pools_name_none(stack):
    spec = _load(stack)
    named = named_nodes.named(spec)
    patched = {o.manifest["metadata"]["name"] for o in manifests.build(spec).objects if o.kind == "Node"}
    assert patched and patched == set(named)
    for pool in spec.pools:
        if pool.node_selector:
            assert not any(pool.name in pools for pools in named.values())
        for node in pool.nodes:
            assert named[node] == [pool.name]


class FakeApi:
    """GET /api/v1/nodes/NAME and the paged list, answered as the API server does."""

    def __init__(self, present: set[str], status: int = 200, page: int = 2):
        self.present, self.status, self.page = sorted(present), status, page
        self.paths: list[str] = []

    def __call__(self, method: str, path: str, body=None):
        assert method == "GET"
        self.paths.append(path)
        if self.status != 200:
            return self.status, {"kind": "Status", "code": self.status}
        if path.startswith("/api/v1/nodes/"):
            name = path.rsplit("/", 1)[1]
            if name in self.present:
                return 200, {"kind": "Node", "metadata": {"name": name}}
            return 404, {"kind": "Status", "code": 404, "reason": "NotFound"}
        start = int(path.split("continue=")[1]) if "continue=" in path else 0
        items = [{"metadata": {"name": n}} for n in self.present[start : start + self.page]]
        more = {"continue": str(start + self.page)} if start + self.page < len(self.present) else {}
        return 200, {"items": items, "metadata": more}


def test_a_few_named_nodes_are_read_one_by_one():
    api = FakeApi({"dev-gpu-1", "other"})
    assert named_nodes.missing(api, ["dev-gpu1", "dev-gpu-1"]) == ["dev-gpu1"]
    assert api.paths == ["/api/v1/nodes/dev-gpu-1", "/api/v1/nodes/dev-gpu1"]


def test_many_named_nodes_are_read_with_one_paged_list():
    n = named_nodes.ONE_BY_ONE + 1
    present = {f"n{i}" for i in range(n)}
    api = FakeApi(present | {"unrelated"}, page=7)
    assert named_nodes.missing(api, [*present, "typo"]) == ["typo"]
    assert all(p.startswith("/api/v1/nodes?limit=") for p in api.paths) and len(api.paths) > 1
    assert named_nodes.missing(FakeApi(present), present) == []


@pytest.mark.parametrize("many", [False, True])
def test_a_denied_read_proves_nothing_and_is_an_error(many):
    names = [f"n{i}" for i in range(named_nodes.ONE_BY_ONE + 1 if many else 1)]
    with pytest.raises(named_nodes.LiveReadError, match="HTTP 403"):
        named_nodes.missing(FakeApi(set(), status=403), names)


def test_the_refusal_names_the_nodes_and_their_pools():
    one = named_nodes.refusal(["dev-gpu1"], {"dev-gpu1": ["l4-shared"]})
    assert "node named in nodePools[].nodes does not exist in the cluster: dev-gpu1 (pool l4-shared)" in one
    assert "never creates" in one
    absent = [f"n{i:02}" for i in range(named_nodes.SHOWN + 3)]
    many = named_nodes.refusal(absent, {n: ["p"] for n in absent})
    assert f"{len(absent)} nodes named" in many and "and 3 more" in many and absent[-1] not in many


# --- the program's read: a warning in a preview, an error in an update, before registering ----------------


@pytest.fixture
def warnings(monkeypatch):
    out: list[str] = []
    monkeypatch.setattr(live_nodes, "_under_mocks", lambda: False)
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: out.append(msg))
    return out


def _reader(absent: list[str] | Exception):
    def read(spec, kubeconfig, context):
        if isinstance(absent, Exception):
            raise absent
        return absent

    return read


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_missing_named_node_warns_in_a_preview_and_stops_an_update(monkeypatch, warnings, dry_run):
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: dry_run)
    spec = _load("dev")
    typo = "dev-gpu-l4-1x"
    pool = named_nodes.named(spec)["dev-gpu-l4-1"][0]
    named = {**named_nodes.named(spec), typo: [pool]}
    monkeypatch.setattr(named_nodes, "named", lambda s: named)
    read = _reader([typo])
    if dry_run:
        assert live_nodes.check(spec, (None, None), read) == [typo]
        assert len(warnings) == 1 and f"{typo} (pool {pool})" in warnings[0] and "`up` will stop" in warnings[0]
    else:
        with pytest.raises(pulumi.RunError, match=rf"{typo} \(pool {pool}\).*nothing was registered"):
            live_nodes.check(spec, (None, None), read)


@pytest.mark.parametrize("dry_run", [True, False])
def test_an_unreadable_cluster_warns_in_a_preview_and_stops_an_update(monkeypatch, warnings, dry_run):
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: dry_run)
    read = _reader(named_nodes.LiveReadError("cannot read whether the spec's named nodes exist: refused"))
    if dry_run:
        assert live_nodes.check(_load("dev"), (None, None), read) == []
        assert "cannot read whether" in warnings[0]
    else:
        with pytest.raises(pulumi.RunError, match="nothing was registered"):
            live_nodes.check(_load("dev"), (None, None), read)


def test_present_nodes_pass_and_an_output_kubeconfig_is_said_and_skipped(monkeypatch, warnings):
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)
    assert live_nodes.check(_load("dev"), ("kubeconfig", None), _reader([])) == []
    assert not warnings

    def never(*_):
        raise AssertionError("read with an Output kubeconfig")

    assert live_nodes.check(_load("dev"), (pulumi.Output.from_input("x"), None), never) == []
    assert "is an Output" in warnings[0]


def _kubernetes_objects(mocks) -> list[str]:
    return [a.typ for a in mocks.created if a.typ.startswith("kubernetes:")]


@pytest.mark.parametrize("preview", [True, False])
def test_the_program_registers_no_kubernetes_object_when_an_update_names_a_missing_node(monkeypatch, warnings, preview):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(named_nodes, "read_missing_for", _reader(["dev-gpu-a100-1"]))
    mocks, _, error = run_program({"spec": "stacks/dev/spec.yaml"}, stack="dev", preview=preview)
    if preview:
        assert error is None, error
        assert any("dev-gpu-a100-1 (pool " in w for w in warnings), warnings
        assert "kubernetes:core/v1:NodePatch" in _kubernetes_objects(mocks)
    else:
        assert error is not None and "dev-gpu-a100-1 (pool " in str(error) and "nothing was registered" in str(error)
        assert _kubernetes_objects(mocks) == []


def test_the_program_patches_nodes_that_exist(monkeypatch, warnings):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(named_nodes, "read_missing_for", _reader([]))
    mocks, _, error = run_program({"spec": "stacks/dev/spec.yaml"}, stack="dev", preview=False)
    assert error is None, error
    assert "kubernetes:core/v1:NodePatch" in _kubernetes_objects(mocks)
