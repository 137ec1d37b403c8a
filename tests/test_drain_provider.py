"""The drain step's decision (gpupool/deploy/drain_provider.py): it drains only when the node's config changes, by the
rule of gpupool.k8s.rollout.done(), and its diff asks for an update only on a node or config change."""

from __future__ import annotations

import pytest

from gpupool.deploy import drain_provider as d
from gpupool.k8s import kubeclient

CHECKED, LABEL = d.LABEL_CHECKED, d.LABEL_MIG_CONFIG


@pytest.mark.parametrize(
    ("labels", "drains"),
    [
        ({CHECKED: "old", LABEL: "old"}, True),  # a real change
        ({CHECKED: "new", LABEL: "new"}, False),  # nothing changes
        ({CHECKED: "old", LABEL: "new"}, False),  # the label already is the target
        ({LABEL: "old"}, False),  # never rolled by gpupool: done() does not wait either
        ({}, False),  # a new node
    ],
)
def test_drains_only_when_the_config_changes(labels, drains):
    assert d.changing(labels, "new") is drains


def test_diff_ignores_a_moved_kubeconfig_and_sees_a_new_config():
    old = {"node": "n", "config": "a", "kubeconfig": "/x", "context": ""}
    assert d.DrainProvider().diff("n", old, {**old, "kubeconfig": "/y"}).changes is False
    assert d.DrainProvider().diff("n", old, {**old, "config": "b"}).changes is True


def test_client_reads_server_token_and_context_from_kubeconfig_contents():
    text = (
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "clusters: [{name: c, cluster: {server: 'https://h:6443/', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t0k}}]\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
    )
    client = kubeclient.Client(text)
    assert client.server == "https://h:6443" and client.token == "t0k"
    with pytest.raises(kubeclient.KubeconfigError, match="no context named 'b'"):
        kubeclient.Client(text, "b")
    # A legacy auth-provider is refused, not guessed; an exec plugin that cannot run is a clear error.
    with pytest.raises(kubeclient.KubeconfigError, match="auth-provider credentials are not supported"):
        kubeclient.Client(text.replace("{token: t0k}", "{auth-provider: {name: gcp}}"))
    with pytest.raises(kubeclient.KubeconfigError, match="exec credential plugin did not run"):
        kubeclient.Client(text.replace("{token: t0k}", "{exec: {command: /nonexistent/plugin}}"))


def test_an_exec_plugin_supplies_the_token_as_client_go_runs_it(tmp_path):
    """EKS, GKE and AKS kubeconfigs authenticate with an exec plugin: it is run with KUBERNETES_EXEC_INFO and the
    kubeconfig's env, and the token of the ExecCredential it prints is used; a failing plugin is a clear error."""
    import sys

    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, os\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "assert info['kind'] == 'ExecCredential' and os.environ['CLUSTER'] == 'c1'\n"
        "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',"
        " 'status': {'token': 'from-exec'}}))\n"
    )
    user = (
        f"{{exec: {{apiVersion: client.authentication.k8s.io/v1, command: '{sys.executable}', args: ['{plugin}'],"
        " env: [{name: CLUSTER, value: c1}]}}"
    )
    text = (
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "clusters: [{name: c, cluster: {server: 'https://h:6443', insecure-skip-tls-verify: true}}]\n"
        f"users: [{{name: u, user: {user}}}]\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
    )
    assert kubeclient.Client(text).token == "from-exec"
    plugin.write_text("raise SystemExit(3)\n")
    with pytest.raises(kubeclient.KubeconfigError, match="exited 3"):
        kubeclient.Client(text)
