"""The drain step's decision (gpupool/deploy/drain_provider.py): it drains only when the node's config changes, by the
old chain's rule (rollout.done() before the mig step), and its diff asks for an update only on a node or config change."""

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
    plugin = "{exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: /nonexistent/p}}"
    with pytest.raises(kubeclient.KubeconfigError, match="exec plugin '/nonexistent/p' was not found"):
        kubeclient.Client(text.replace("{token: t0k}", plugin))


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
        f"{{exec: {{apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: '{sys.executable}',"
        f" args: ['{plugin}'],"
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


UNREACHABLE = (
    "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
    # Port 9 (discard) on loopback: nothing listens there in a test sandbox, so the connection is refused at once.
    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9', insecure-skip-tls-verify: true}}]\n"
    "users: [{name: u, user: {token: t}}]\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
)
PROPS = {"node": "gpu-1", "config": "new", "kubeconfig": UNREACHABLE, "context": "", "timeoutSeconds": 5}


class _Context:
    """The grpc servicer context the dynamic host hands its methods: abort() records what the engine would show."""

    details = ""

    def abort(self, _code, details):
        self.details = details


def _sent(run) -> str:
    """What the engine receives when create fails, through the host's own wrapper (pulumi/dynamic/__main__.py
    `_abort_with_traceback`, which sends traceback.format_exc()). Importing that module would start the host's
    server, so the wrapper is read from its source and run as is."""
    import ast
    import importlib.util
    import textwrap

    source = open(importlib.util.find_spec("pulumi.dynamic").submodule_search_locations[0] + "/__main__.py").read()
    node = next(
        n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "_abort_with_traceback"
    )
    scope: dict = {}
    exec(
        compile("import grpc, traceback\n" + textwrap.dedent(ast.get_source_segment(source, node)), "host", "exec"),
        scope,
    )
    context = _Context()
    scope["_abort_with_traceback"](lambda _self, _req, _ctx: run())(None, None, context)
    return context.details


@pytest.fixture(autouse=True)
def _no_traceback_limit(monkeypatch):
    # Absent during the test and absent again after it, whatever create set: a limit left behind would also empty
    # the Pulumi SDK's own stack walk (pulumi/runtime/resource.py, _get_stack_trace) in later tests.
    import sys

    monkeypatch.setattr(sys, "tracebacklimit", 0, raising=False)
    monkeypatch.delattr(sys, "tracebacklimit")


def test_an_unreachable_api_server_fails_the_step_in_one_line_not_a_traceback():
    sent = _sent(lambda: d.DrainProvider().create(dict(PROPS)))
    assert sent.startswith("gpupool.k8s.kubeclient.KubeAPIError: GET https://127.0.0.1:9/api/v1/nodes/gpu-1: "), sent
    assert "Traceback" not in sent and len(sent.strip().splitlines()) == 1, sent


def test_a_blocked_drain_is_sent_as_its_message_and_a_bug_keeps_its_traceback(monkeypatch):
    from gpupool.k8s import drain

    def blocked(_self, _props):
        raise drain.DrainError("pod t/p cannot be evicted within 5s: PodDisruptionBudget t/b allows no disruption")

    def bug(_self, _props):
        raise KeyError("spec")

    monkeypatch.setattr(d.DrainProvider, "_drain", blocked)
    sent = _sent(lambda: d.DrainProvider().create(dict(PROPS)))
    assert sent == (
        "gpupool.k8s.drain.DrainError: pod t/p cannot be evicted within 5s: PodDisruptionBudget t/b allows no disruption\n"
    )
    # Later in the same process (the host serves every step of the run), a bug is still sent with its traceback.
    monkeypatch.setattr(d.DrainProvider, "_drain", bug)
    sent = _sent(lambda: d.DrainProvider().update("gpu-1", {}, dict(PROPS)))
    assert sent.startswith("Traceback (most recent call last):") and "in bug" in sent, sent


def test_the_limit_does_not_outlive_the_test():
    import sys

    assert not hasattr(sys, "tracebacklimit")  # runs after the tests above in this module's order
