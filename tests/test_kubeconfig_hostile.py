"""Hostile and broken kubeconfigs (issue 34): no credential reaches a message, a stream, a file or another host.

A unique canary is put into every credential field a kubeconfig has (token, a `token: |` block scalar,
tokenFile, password, client-key-data, an exec plugin's env value and the token it returns); each failure is
triggered through the library (gpupool.k8s.kubeclient, mig_in_use.read_kept_for, the drain step's provider)
and through `gpupool render --kubeconfig`; the canary must appear in no exception text, stdout, stderr or
written file, and each message must name the file and the field so that a person can fix it. The library
checks start from `redact.forget_all()` and the CLI checks turn the stream scrubber off, so that the second
line of defence cannot hide a leak of the first.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import secrets
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpupool import redact
from gpupool.cli.main import main as cli_main
from gpupool.k8s import kubeclient, mig_in_use

ROOT = Path(__file__).resolve().parents[1]
SPEC = str(ROOT / "stacks" / "dev" / "spec.yaml")
CANARY = f"CANARY-TOKEN-{secrets.token_hex(8)}"
V1 = "client.authentication.k8s.io/v1"
REFUSED = "https://127.0.0.1:9"  # port 9 (discard) on loopback: nothing listens, the connection is refused at once

PLUGIN = """\
import json, os, sys
mode = sys.argv[1]
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
token = os.environ.get("PLUGIN_SECRET", "")
def cred(**kw):
    print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", **kw}))
if mode == "fail":
    sys.stderr.write("\\x1b[31mdebug: secret is " + token + "\\x1b[0m\\n")
    sys.stderr.write("error: the SSO session has expired\\n  run `aws sso login` and retry\\n")
    sys.exit(255)
elif mode == "token":
    cred(status={"token": token + "\\n"})
elif mode == "list":
    print(json.dumps([token]))
elif mode == "kind":
    print(json.dumps({"apiVersion": info["apiVersion"], "kind": "Secret", "status": {"token": token}}))
elif mode == "version":
    print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                      "status": {"token": token}}))
elif mode == "nostatus":
    cred(spec={"token": token})
elif mode == "notjson":
    print("token=" + token)
elif mode == "keyonly":
    cred(status={"clientKeyData": token})
elif mode == "info":
    cred(status={"token": json.dumps(info["spec"]).replace(" ", "").replace('"', "'")})
"""


# --- kubeconfigs --------------------------------------------------------------------------------------------


def _kubeconfig(server: str | None, user: dict[str, Any] | None, **cluster: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "ctx",
        "clusters": [{"name": "prod", "cluster": {**({"server": server} if server else {}), **cluster}}],
        "users": [{"name": "admin", "user": user or {}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "prod", "user": "admin"}}],
    }


def _write(tmp_path: Path, config: dict[str, Any] | str, name: str = "kubeconfig") -> Path:
    path = tmp_path / name
    path.write_text(config if isinstance(config, str) else yaml.safe_dump(config))
    return path


def _block_scalar(server: str) -> str:
    """A kubeconfig whose token is a `token: |` block scalar, as pasted from a Secret: it ends in a newline."""
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: ctx\n"
        f"clusters:\n- name: prod\n  cluster:\n    server: {server}\n"
        f"users:\n- name: admin\n  user:\n    token: |\n      {CANARY}\n"
        "contexts:\n- name: ctx\n  context: {cluster: prod, user: admin}\n"
    )


def _exec(tmp_path: Path, mode: str, **extra: Any) -> dict[str, Any]:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN)
    spec = {
        "apiVersion": V1,
        "interactiveMode": "Never",
        "command": sys.executable,
        "args": [str(plugin), mode],
        "env": [{"name": "PLUGIN_SECRET", "value": CANARY}],
    }
    return {"exec": {**spec, **extra}}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _bogus_key() -> str:
    return _b64(f"-----BEGIN PRIVATE KEY-----\n{CANARY}\n-----END PRIVATE KEY-----\n")


def _bogus_cert() -> str:
    return _b64("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")


# Each case: a kubeconfig (made in tmp_path), the error class, and what its message must name.
Case = Callable[[Path], Path]
CASES: dict[str, tuple[Case, type[Exception], tuple[str, ...]]] = {
    "yaml error on the token line": (
        lambda t: _write(t, _block_scalar(REFUSED).replace(f"token: |\n      {CANARY}", f"token: {CANARY}: [")),
        kubeclient.KubeconfigError,
        ("not valid YAML at line 11",),
    ),
    # The parser quotes an undefined alias's name and an unknown tag in its problem: neither is shown.
    "undefined alias as the token": (
        lambda t: _write(t, _block_scalar(REFUSED).replace(f"token: |\n      {CANARY}", f"token: *{CANARY}")),
        kubeclient.KubeconfigError,
        ("not valid YAML at line 11",),
    ),
    "unknown tag on the token": (
        lambda t: _write(t, _block_scalar(REFUSED).replace(f"token: |\n      {CANARY}", f"token: !{CANARY} x")),
        kubeclient.KubeconfigError,
        ("not valid YAML at line 11",),
    ),
    "block-scalar token, unreachable server": (
        lambda t: _write(t, _block_scalar(REFUSED)),
        kubeclient.KubeAPIError,
        ("https://127.0.0.1:9/api/v1/",),
    ),
    "token with a line break inside": (
        lambda t: _write(t, _kubeconfig(REFUSED, {"token": f"{CANARY}\nsecond-line"})),
        kubeclient.KubeconfigError,
        ("user 'admin'", "token has a line break"),
    ),
    "tokenFile, unreachable server": (
        lambda t: _write(t, _kubeconfig(REFUSED, {"tokenFile": str(_write(t, f"\n  {CANARY}\n", "token"))})),
        kubeclient.KubeAPIError,
        ("https://127.0.0.1:9/api/v1/",),
    ),
    "tokenFile missing": (
        lambda t: _write(t, _kubeconfig(REFUSED, {"tokenFile": "no-such-token"})),
        kubeclient.KubeconfigError,
        ("tokenFile", "no-such-token", "no such file"),
    ),
    "password, unreachable server": (
        lambda t: _write(t, _kubeconfig(REFUSED, {"username": "admin", "password": CANARY})),
        kubeclient.KubeAPIError,
        ("https://127.0.0.1:9/api/v1/",),
    ),
    "token and password both": (
        lambda t: _write(t, _kubeconfig(REFUSED, {"token": CANARY, "username": "admin", "password": CANARY})),
        kubeclient.KubeconfigError,
        ("user 'admin'", "both a token and a username/password"),
    ),
    "client-key-data not base64": (
        lambda t: _write(
            t, _kubeconfig(REFUSED, {"client-certificate-data": _bogus_cert(), "client-key-data": CANARY})
        ),
        kubeclient.KubeconfigError,
        ("user 'admin'", "client-key-data is not valid base64"),
    ),
    "client-key-data not PEM": (
        lambda t: _write(
            t, _kubeconfig(REFUSED, {"client-certificate-data": _bogus_cert(), "client-key-data": _bogus_key()})
        ),
        kubeclient.KubeconfigError,
        ("user 'admin'", "client-key[-data]", "not a PEM certificate"),
    ),
    "certificate-authority-data not base64": (
        lambda t: _write(t, _kubeconfig(REFUSED, {"token": CANARY}, **{"certificate-authority-data": "%%%"})),
        kubeclient.KubeconfigError,
        ("cluster 'prod'", "certificate-authority-data is not valid base64"),
    ),
    "certificate-authority-data not PEM": (
        lambda t: _write(t, _kubeconfig(REFUSED, {"token": CANARY}, **{"certificate-authority-data": _b64("x")})),
        kubeclient.KubeconfigError,
        ("cluster 'prod'", "certificate-authority-data is not a PEM certificate"),
    ),
    "no server": (
        lambda t: _write(t, _kubeconfig(None, {"token": CANARY}, **{"insecure-skip-tls-verify": True})),
        kubeclient.KubeconfigError,
        ("cluster 'prod'", "has no server"),
    ),
    "failing exec plugin": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "fail"))),
        kubeclient.KubeconfigError,
        ("user 'admin'", "exited 255", "run `aws sso login` and retry"),
    ),
    "exec plugin prints a JSON list": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "list"))),
        kubeclient.KubeconfigError,
        ("user 'admin'", "not an object (an ExecCredential)"),
    ),
    "exec plugin prints another kind": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "kind"))),
        kubeclient.KubeconfigError,
        ("user 'admin'", "kind is not ExecCredential"),
    ),
    "exec plugin prints another apiVersion": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "version"))),
        kubeclient.KubeconfigError,
        ("user 'admin'", "another apiVersion than exec.apiVersion client.authentication.k8s.io/v1"),
    ),
    "exec plugin prints no status": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "nostatus"))),
        kubeclient.KubeconfigError,
        ("user 'admin'", "without a status"),
    ),
    "exec plugin prints no JSON": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "notjson"))),
        kubeclient.KubeconfigError,
        ("user 'admin'", "no JSON ExecCredential"),
    ),
    "exec plugin returns a key without a certificate": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "keyonly"))),
        kubeclient.KubeconfigError,
        ("user 'admin'", "only one of clientCertificateData and clientKeyData"),
    ),
    "exec token, unreachable server": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "token"))),
        kubeclient.KubeAPIError,
        ("https://127.0.0.1:9/api/v1/",),
    ),
    "exec interactiveMode Always": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "token", interactiveMode="Always"))),
        kubeclient.KubeconfigError,
        ("user 'admin'", "interactiveMode is Always"),
    ),
    "exec v1 without interactiveMode": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "token", interactiveMode=None))),
        kubeclient.KubeconfigError,
        ("user 'admin'", "exec.interactiveMode must be specified"),
    ),
    "exec without apiVersion": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "token", apiVersion=None))),
        kubeclient.KubeconfigError,
        ("user 'admin'", "exec.apiVersion must be specified"),
    ),
    "exec env without a name": (
        lambda t: _write(t, _kubeconfig(REFUSED, _exec(t, "token", env=[{"value": CANARY}]))),
        kubeclient.KubeconfigError,
        ("user 'admin'", "exec.env[0] needs a name"),
    ),
}


def _drop_none(config_path: Path) -> None:
    """`interactiveMode=None` in a case means the field is absent: remove None values from exec."""
    data = yaml.safe_load(config_path.read_text())
    if isinstance(data, dict):
        for user in data.get("users") or []:
            ex = (user.get("user") or {}).get("exec")
            if isinstance(ex, dict):
                for k in [k for k, v in ex.items() if v is None]:
                    del ex[k]
        config_path.write_text(yaml.safe_dump(data))


def _make(case: str, tmp_path: Path) -> Path:
    path = CASES[case][0](tmp_path)
    if not CASES[case][2][0].startswith("not valid YAML") and "block-scalar" not in case:
        _drop_none(path)
    return path


def _no_canary(*texts: str) -> None:
    for text in texts:
        assert CANARY not in text, text
        assert CANARY[len("CANARY-TOKEN-") :] not in text, text  # not even the canary's random part


@pytest.fixture(autouse=True)
def _fresh_registry():
    redact.forget_all()
    yield
    redact.forget_all()


# --- the library ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_the_client_fails_in_one_line_naming_the_file_and_field_and_never_a_credential(case, tmp_path):
    path = _make(case, tmp_path)
    _, kind, named = CASES[case]
    with pytest.raises(kind) as caught:
        client = kubeclient.Client(str(path), timeout=5)
        client("GET", "/api/v1/nodes?limit=1&continue=" + CANARY)  # a query is never shown either
    text = str(caught.value)
    _no_canary(text, repr(caught.value))
    assert "\n" not in text and text.isprintable(), text
    for part in named:
        assert part in text, text
    if kind is kubeclient.KubeconfigError:
        assert str(path) in text, text  # the file is named
    # And the credentials it did read are registered, for the stream scrubber's second line of defence.
    if "unreachable" in case or "exec plugin" in case or "failing" in case:
        assert CANARY in redact.registered(), case


def test_the_live_read_says_the_same_in_one_line(tmp_path):
    from gpupool.rules.engine import validate_file

    spec = validate_file(SPEC).spec
    for case in CASES:
        sub = tmp_path / case.replace(" ", "-")
        sub.mkdir()
        with pytest.raises(mig_in_use.LiveReadError) as caught:
            mig_in_use.read_kept_for(spec, str(_make(case, sub)), None)
        text = str(caught.value)
        _no_canary(text)
        assert text.startswith("cannot read which MIG configs") and "\n" not in text, text
        assert all(part in text for part in CASES[case][2]), (case, text)


@pytest.mark.parametrize(
    "case", ["yaml error on the token line", "block-scalar token, unreachable server", "failing exec plugin"]
)
def test_the_drain_step_fails_with_one_line_and_no_credential(case, tmp_path, monkeypatch):
    from gpupool.deploy import drain_provider
    from tests.test_drain_provider import _sent

    monkeypatch.setattr(sys, "tracebacklimit", 0, raising=False)
    monkeypatch.delattr(sys, "tracebacklimit")
    props = {"node": "gpu-1", "config": "new", "context": "", "timeoutSeconds": 5}
    # As the Kubernetes provider is given it: the kubeconfig's contents, or its path.
    for kubeconfig in (_make(case, tmp_path).read_text(), str(_make(case, tmp_path))):
        sent = _sent(lambda k=kubeconfig: drain_provider.DrainProvider().create({**props, "kubeconfig": k}))
        _no_canary(sent)
        assert "Traceback" not in sent and len(sent.strip().splitlines()) == 1, sent
        assert sent.startswith(("gpupool.k8s.kubeconfig.KubeconfigError: ", "gpupool.k8s.kubeclient.KubeAPIError:"))
        assert all(part in sent for part in CASES[case][2]), sent


def test_a_missing_kubeconfig_file_is_named_not_parsed_as_contents(tmp_path, monkeypatch):
    missing = tmp_path / "nope" / "kubeconfig"
    with pytest.raises(kubeclient.KubeconfigError, match="no such file") as caught:
        kubeclient.Client(str(missing))
    assert str(missing) in str(caught.value)
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(missing), str(tmp_path / "other")]))
    with pytest.raises(kubeclient.KubeconfigError, match=r"no file \$KUBECONFIG names exists") as caught:
        kubeclient.Client(None)
    assert str(missing) in str(caught.value)


def _key_pair(tmp_path: Path, *extra: str) -> tuple[Path, Path]:
    """A throwaway self-signed certificate and key made by the openssl CLI (no key material is kept in the repo)."""
    import shutil
    import subprocess

    if not shutil.which("openssl"):
        pytest.skip("needs the openssl CLI to make a throwaway key")
    key, cert = tmp_path / "client.key", tmp_path / "client.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-days", "1"]
        + ["-subj", "/CN=admin", "-keyout", str(key), "-out", str(cert), *extra],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    return cert, key


def test_a_client_key_file_is_read_relative_to_the_kubeconfig_and_registered(tmp_path):
    cert, key = _key_pair(tmp_path, "-nodes")
    user = {"client-certificate": cert.name, "client-key": key.name}  # relative: to the kubeconfig's directory
    kubeclient.Client(str(_write(tmp_path, _kubeconfig(REFUSED, user))))
    body = [line for line in key.read_text().splitlines() if not line.startswith("-----")]
    assert body and all(line in redact.registered() for line in body if len(line) >= redact.MIN_LENGTH)


def test_an_encrypted_client_key_is_refused_and_never_prompts(tmp_path):
    """An encrypted key would make OpenSSL prompt on the terminal (a hang in a provider); client-go cannot use
    one either."""
    cert, key = _key_pair(tmp_path, "-passout", "pass:" + CANARY)
    user = {"client-certificate-data": _b64(cert.read_text()), "client-key-data": _b64(key.read_text())}
    with pytest.raises(kubeclient.KubeconfigError, match="encrypted") as caught:
        kubeclient.Client(str(_write(tmp_path, _kubeconfig(REFUSED, user))))
    assert "user 'admin'" in str(caught.value)
    _no_canary(str(caught.value))


# --- redirects: two servers on 127.0.0.1 ----------------------------------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    answer: Callable[[http.server.BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]]
    seen: list[tuple[str, dict[str, str]]]

    def _handle(self) -> None:
        type(self).seen.append((self.path, dict(self.headers)))
        status, headers, body = type(self).answer(self)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _handle

    def log_message(self, *_args: Any) -> None:
        pass


@contextmanager
def _server(answer) -> Iterator[tuple[str, list[tuple[str, dict[str, str]]]]]:
    """An HTTP server on 127.0.0.1 (a free port) answering with ANSWER(handler); yields its URL and what it saw."""
    handler = type("Handler", (_Recorder,), {"answer": staticmethod(answer), "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _ok(_handler) -> tuple[int, dict[str, str], bytes]:
    return 200, {"Content-Type": "application/json"}, json.dumps({"kind": "NodeList", "items": []}).encode()


USERS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "token": lambda t: {"token": CANARY},
    "tokenFile": lambda t: {"tokenFile": str(_write(t, CANARY + "\n", "token"))},
    "password": lambda t: {"username": "admin", "password": CANARY},
    "exec": lambda t: _exec(t, "token"),
}


@pytest.mark.parametrize("user", [*USERS, "block scalar"])
def test_a_redirect_to_another_host_is_refused_and_the_credential_never_reaches_it(user, tmp_path):
    with _server(_ok) as (other, seen_there):
        target = other + "/api/v1/nodes?token=" + CANARY  # where it redirects: no path or query is shown

        def redirect(_handler):
            return 302, {"Location": target}, b""

        with _server(redirect) as (server, seen_here):
            config = _block_scalar(server) if user == "block scalar" else _kubeconfig(server, USERS[user](tmp_path))
            client = kubeclient.Client(str(_write(tmp_path, config)), timeout=5)
            with pytest.raises(kubeclient.KubeAPIError) as caught:
                client("GET", "/api/v1/nodes?limit=1")
    text = str(caught.value)
    assert seen_here and not seen_there, seen_there  # nothing at all went to the other host
    _no_canary(text)
    assert f"the API server at {server}" in text and f"redirected to another host, {other}" in text, text
    assert "/api/v1/nodes?token" not in text and "\n" not in text, text
    assert "context 'ctx' of kubeconfig" in text, text


def test_a_same_origin_redirect_is_followed_with_the_stripped_token(tmp_path):
    def answer(handler):
        if handler.path.startswith("/prefix"):
            return _ok(handler)
        return 301, {"Location": "/prefix" + handler.path}, b""

    with _server(answer) as (server, seen):
        client = kubeclient.Client(str(_write(tmp_path, _block_scalar(server))), timeout=5)
        assert client("GET", "/api/v1/nodes") == (200, {"kind": "NodeList", "items": []})
    assert [path for path, _ in seen] == ["/api/v1/nodes", "/prefix/api/v1/nodes"]
    # The block scalar's newline is stripped (as client-go's tokenFile reader strips a file's), on both requests.
    assert all(headers.get("Authorization") == f"Bearer {CANARY}" for _, headers in seen), seen


@pytest.mark.parametrize("user", list(USERS))
def test_each_credential_kind_is_sent_as_client_go_sends_it(user, tmp_path):
    with _server(_ok) as (server, seen):
        kubeclient.Client(str(_write(tmp_path, _kubeconfig(server, USERS[user](tmp_path)))), timeout=5)("GET", "/api")
    expected = f"Basic {_b64('admin:' + CANARY)}" if user == "password" else f"Bearer {CANARY}"
    assert seen[0][1].get("Authorization") == expected


def test_an_exec_plugin_gets_the_cluster_only_when_it_asks_and_runs_non_interactively(tmp_path):
    def token(provide: bool) -> str:
        user = _exec(tmp_path, "info", provideClusterInfo=provide, apiVersion="client.authentication.k8s.io/v1beta1")
        del user["exec"]["interactiveMode"]  # v1beta1 defaults to IfAvailable (client-go defaults.go)
        return kubeclient.Client(
            str(_write(tmp_path, _kubeconfig(REFUSED, user, **{"insecure-skip-tls-verify": True})))
        ).token

    assert token(False) == "{'interactive':false}"
    assert (
        token(True)
        == "{'interactive':false,'cluster':{'server':'https://127.0.0.1:9','insecure-skip-tls-verify':true}}"
    )


# --- the command line -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [*CASES, "redirect"])
def test_render_with_a_hostile_kubeconfig_prints_one_line_writes_nothing_and_leaks_nothing(
    case, tmp_path, capsys, monkeypatch
):
    # The scrubber of every stream is off: what is printed must hold no credential in the first place.
    monkeypatch.setattr(redact, "scrub", lambda text: text)
    out = tmp_path / "out"

    def render(kubeconfig: Path) -> int:
        return cli_main(["render", SPEC, "--output-dir", str(out), "--kubeconfig", str(kubeconfig)])

    if case == "redirect":
        with _server(_ok) as (other, seen_there):
            with _server(lambda _h: (307, {"Location": other + "/x?t=" + CANARY}, b"")) as (server, _):
                code = render(_write(tmp_path, _kubeconfig(server, _exec(tmp_path, "token"))))
        assert not seen_there
        named: tuple[str, ...] = ("redirected to another host",)
    else:
        code = render(_make(case, tmp_path))
        named = CASES[case][2]
    captured = capsys.readouterr()
    _no_canary(captured.out, captured.err)
    assert code == 1, captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot read which MIG configs"), captured.err
    assert lines[0].endswith("nothing was changed") and all(part in lines[0] for part in named), lines[0]
    assert not out.exists()
    for path in tmp_path.rglob("*"):  # nothing written anywhere holds it (the kubeconfig files excepted)
        if path.is_file() and path.name not in ("kubeconfig", "token", "plugin.py"):
            _no_canary(path.read_text(errors="replace"))


def test_render_names_a_missing_kubeconfig(tmp_path, capsys):
    out = tmp_path / "out"
    code = cli_main(["render", SPEC, "--output-dir", str(out), "--kubeconfig", str(tmp_path / "absent")])
    err = capsys.readouterr().err
    assert code == 1 and f"kubeconfig {tmp_path / 'absent'}: no such file" in err, err
    assert not out.exists()


def test_a_plugins_stderr_tail_is_its_last_lines_on_one_line_capped_and_masked():
    from gpupool.k8s import exec_credential

    noise = "\n".join(f"line {i} \x1b[1mbold\x1b[0m\t\x07" for i in range(1000))
    said = exec_credential.tail(noise + f"\nsecret {CANARY}\n\nrun `aws sso login`\n", [CANARY])
    assert said.endswith("secret <redacted> | run `aws sso login`"), said
    assert len(said) <= exec_credential.STDERR_CHARS and said.isprintable() and "line 994" not in said, said
    assert said.startswith("line 997 bold | line 998 bold"), said
