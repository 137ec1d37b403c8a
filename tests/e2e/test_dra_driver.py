"""NVIDIA's DRA driver as gpupool installs it: the real chart (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1, from
the Go module proxy's zip of the driver: conftest.dra_driver_chart), registered by `pulumi up` (the real engine, and
the provider's helm.v4.Chart rendering it against the API server's discovery) on a private kube-apiserver v1.36.3,
with kube-controller-manager's DaemonSet and resourceclaim controllers and kube-scheduler v1.36.3. No kubelet:
the kubelet plugin's pods are created and bound, never run, and the nodes' devices are published as the driver
publishes them (tests/e2e/dra_driver_sim.py). MIG Manager is played by the test: it writes the state label as
mig-parted v0.15.0 does (`pkg/mig/reconfigure/reconfigure.go` 158 `pending` before it changes the GPUs, 239
`success` after).

Proves (issue 39, item 1, the driver's installation):
- the chart installs with gpupool's values: its own guard (`templates/validation.yaml` 33-43) would fail the
  render without gpuResourcesEnabledOverride, and with computeDomains off no ComputeDomain controller is deployed;
- the kubelet plugin runs on DRA pools' nodes only: at once on the whole-GPU L40S node (no MIG Manager there), on
  the A100 MIG node only once MIG Manager reports `success`, never on the device-plugin L4 node;
- a MIG re-layout restarts it, so it enumerates the new partitions (it enumerates devices once, at start:
  cmd/gpu-kubelet-plugin/device_state.go 96): at `pending` the DaemonSet controller removes the node's plugin pod
  (daemon_controller.go 1378-1390, 955), at `success` it makes a new one; the `up` that re-lays the node out leaves
  the driver's release unchanged (the DaemonSet's generation);
- the chart's `gpu.nvidia.com` class is there without `extendedResourceName` (the Pulumi transform; the chart
  renders `nvidia.com/gpu` there: templates/deviceclass-gpu.yaml 13, checked on the chart file itself), and a
  tenant's pod asking `nvidia.com/gpu: 1` is bound through gpupool's L40S class, to the L40S node.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from . import dra_driver_sim as driver
from .stack import E2EStack

pytestmark = pytest.mark.e2e

EXTRA_CONTROLLERS = ("daemonset-controller", "resourceclaim-controller")
REPO = Path(__file__).resolve().parents[2]
STUB_CHART = REPO / "tests" / "charts" / "gpu-operator-stub"
L4, A100, L40S = "drv-l4-1", "drv-a100-1", "drv-l40s-1"
STATE = "nvidia.com/mig.config.state"
NAMESPACE = "gpu-operator"
PLUGIN = "dra-driver-nvidia-gpu-component=kubelet-plugin"  # the chart's selectorLabels (_helpers.tpl 78-85)
SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster:
  name: drv
  draDriver: {chartPath: charts/dra-driver-nvidia-gpu}
nodePools:
  - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [drv-l4-1], sharing: {timeSlicing: {replicas: 2}}}
  - {name: a100-dra, gpu: A100-80GB, gpusPerNode: 4, nodes: [drv-a100-1], allocation: dra, sharing: {mig: {preset: all-balanced}}}
  - {name: l40s-dra, gpu: L40S, gpusPerNode: 2, nodes: [drv-l40s-1], allocation: dra}
tiers:
  - {name: standard, priority: 100}
tenants:
  - {name: vision, tier: standard, owners: [vision-team], gpus: {nvidia.com/gpu: 1}}
  - {name: notebooks, tier: standard, owners: [data-science], gpus: {nvidia.com/mig-1g.10gb: 2}}
"""


@pytest.fixture(scope="module")
def deployed(private_control_plane, toolchain_bin, scheduler_bin, dra_driver_chart, tmp_path_factory):
    cp = private_control_plane
    work = tmp_path_factory.mktemp("gpupool-dra-driver")
    spec = work / "spec.yaml"
    spec.write_text(SPEC)
    shutil.copytree(dra_driver_chart, work / "charts" / "dra-driver-nvidia-gpu")
    for path in (work / "charts").rglob("*"):  # the module cache's files are read-only
        path.chmod(0o755 if path.is_dir() else 0o644)
    cp.start_scheduler()
    nodes = {name: cp.create_gpu_node(name) for name in (L4, A100, L40S)}
    cp.make_schedulable(L4, A100, L40S)
    stack = E2EStack(toolchain_bin, cp.kubeconfig, work, spec=spec, chart=STUB_CHART, stack_name="drv")
    stack.up()
    yield cp, stack, nodes, work
    stack.close()


def _plugin_pods(cp) -> dict[str, str]:
    """node -> uid of the kubelet plugin's pod there. A pod being deleted is removed at once, as its kubelet would
    once the containers stopped (there is none here: a bound pod's graceful deletion would never finish, and the
    DaemonSet controller makes no new pod while the old one is there)."""
    pods = cp.get_json("pods", "-n", NAMESPACE, "-l", PLUGIN)["items"]
    out = {}
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            name = pod["metadata"]["name"]
            cp.kubectl("delete", "pod", "-n", NAMESPACE, name, "--grace-period=0", "--force", check=False)
            continue
        # A daemon pod names its node in its required node affinity (matchFields metadata.name) until bound.
        node = pod["spec"].get("nodeName") or _affinity_node(pod)
        out[node] = pod["metadata"]["uid"]
    return out


def _affinity_node(pod: dict) -> str:
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return terms["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]


def _set_state(cp, node: str, state: str) -> None:
    cp.kubectl("label", "node", node, f"{STATE}={state}", "--overwrite")


def test_the_real_chart_installs_with_gpupools_values(deployed):
    cp, _, _, work = deployed
    ds = cp.get_json("daemonset", "-n", NAMESPACE, "dra-driver-nvidia-gpu-kubelet-plugin")
    terms = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # The chart's default terms (NFD's PCI labels, nvidia.com/gpu.present) are replaced, not added to.
    keys = {e["key"] for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"]}
    assert keys == {"gpupool.dev/pool", STATE}
    deployments = cp.get_json("deployments", "-n", NAMESPACE)["items"]
    assert not [d for d in deployments if "compute-domain" in d["metadata"]["name"]]  # computeDomains off
    # The chart as shipped maps nvidia.com/gpu in its class; the installed class does not.
    template = (work / "charts" / "dra-driver-nvidia-gpu" / "templates" / "deviceclass-gpu.yaml").read_text()
    assert "extendedResourceName: nvidia.com/gpu" in template
    gpu_class = cp.get_json("deviceclass", "gpu.nvidia.com")
    assert "extendedResourceName" not in gpu_class["spec"]
    assert cp.get_json("deviceclass", "mig.nvidia.com")["spec"]["selectors"]  # untouched


def test_the_kubelet_plugin_runs_on_dra_nodes_once_mig_manager_succeeded(deployed):
    cp, _, _, _ = deployed
    cp.wait_for(lambda: L40S in _plugin_pods(cp), 60, what="the kubelet plugin's pod on the L40S node")
    assert set(_plugin_pods(cp)) == {L40S}  # the A100 node has no MIG state yet; the L4 node is no DRA node
    _set_state(cp, A100, "success")  # MIG Manager's start-up run applied the layout
    pods = cp.wait_for(lambda: (p := _plugin_pods(cp)) and A100 in p and p, 60, what="a plugin pod on the A100 node")
    assert set(pods) == {L40S, A100}


def test_a_mig_relayout_restarts_the_kubelet_plugin(deployed):
    cp, stack, _, work = deployed
    before = _plugin_pods(cp)
    assert A100 in before
    generation = cp.get_json("daemonset", "-n", NAMESPACE, "dra-driver-nvidia-gpu-kubelet-plugin")["metadata"][
        "generation"
    ]
    stack.edit("spec.yaml", "preset: all-balanced", "preset: all-1g.10gb")
    stack.up()  # relabels the node (its mig step: no MIG Manager pod here, so it labels and does not wait)
    node = cp.get_json("node", A100)
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] != "all-balanced"
    _set_state(cp, A100, "pending")  # MIG Manager begins the re-layout
    cp.wait_for(lambda: A100 not in _plugin_pods(cp), 60, what="the A100 plugin pod removed at pending")
    assert _plugin_pods(cp).get(L40S) == before[L40S]  # the other node's plugin keeps running
    _set_state(cp, A100, "success")
    after = cp.wait_for(lambda: (p := _plugin_pods(cp)) and A100 in p and p, 60, what="a new A100 plugin pod")
    assert after[A100] != before[A100]
    ds = cp.get_json("daemonset", "-n", NAMESPACE, "dra-driver-nvidia-gpu-kubelet-plugin")
    assert ds["metadata"]["generation"] == generation  # the release did not change


def test_whole_gpus_are_served_through_gpupools_class_beside_the_charts(deployed):
    cp, _, nodes, _ = deployed
    devices = [driver.gpu_device(i, L40S, "NVIDIA L40S", "48Gi") for i in (0, 1)]
    driver.publish(cp, nodes[L40S], devices=devices)
    cp.wait_for(lambda: cp.quota_synced("vision"), 60, what="vision's gpu-quota status")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train"},
        "spec": {
            "containers": [
                {"name": "c", "image": "registry.invalid/app:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ]
        },
    }
    cp.apply(pod, namespace="vision", as_user="vic", as_groups=["vision-team"])
    bound = cp.wait_for(
        lambda: (p := cp.get_json("pod", "-n", "vision", "train"))["spec"].get("nodeName") and p,
        60,
        what="the pod bound",
    )
    assert bound["spec"]["nodeName"] == L40S
    claims = cp.get_json("resourceclaims", "-n", "vision")["items"]
    (claim,) = [c for c in claims if c["status"].get("allocation")]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["pool"] == L40S and result["device"] in {"gpu-0", "gpu-1"}
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "gpupool-l40s-dra-gpu"
