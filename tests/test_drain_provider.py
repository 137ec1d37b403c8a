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
    # An exec credential is refused, not guessed.
    with pytest.raises(kubeclient.KubeconfigError, match="exec"):
        kubeclient.Client(text.replace("{token: t0k}", "{exec: {command: x}}"))
