"""`gpupool usage` against a careless or hostile Prometheus, URL or command line (issue 34): no credential
reaches stdout, stderr, the JSON or an exception's text; every value handed to Prometheus or read from it is
checked; no request hangs or reads without end; every failure is one clear line and, with `-o json`, a JSON
error object.

The fake Prometheus here listens on 127.0.0.1 only, answers range queries shaped as Prometheus' API does
(web/api/v1/api.go queryRange: a matrix, one [time, "value"] pair per step), and every loop it runs is
bounded. The spec and its series' labels are tests/test_usage.py's. Deadlines are tested with small limits
given as flags and servers that would take far longer; nothing asserts on the wall clock."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpupool import redact
from gpupool.analysis import usage
from gpupool.analysis.usage_source import METHODS, spec_values
from gpupool.cli.main import main
from gpupool.monitoring import prometheus as prom
from gpupool.monitoring.duration import DurationError, parse_seconds
from gpupool.monitoring.usage_queries import Queries
from gpupool.rules.engine import load_valid_spec
from tests.test_usage import SPEC, STEP, _series, spec  # noqa: F401 (spec: fixture)
from tests.usage_fake import FakeSource

START, END = 3600, 7200  # one hour of 5-minute steps: 12 points per series
RANGE = ["--start", str(START), "--end", str(END), "--step", "5m"]


@pytest.fixture(autouse=True)
def _clean():
    redact.forget_all()
    yield
    redact.forget_all()


def canary() -> str:
    return "CANARY" + secrets.token_hex(8)


# -- the fake Prometheus -------------------------------------------------------------------------------------------

# Series per query of gpupool.analysis.usage_source (its method names), as tests/test_usage.py's _source has
# them: (labels, value at every step: an integral over the 5-minute step, seconds x GPU-equivalents).
SERIES = {
    "allocated": [({"namespace": "alpha", "pool": "mig"}, "150")],
    "used": [({"namespace": "alpha", "pool": "mig"}, "75")],
    "devices": [({"pool": "mig"}, "75")],
    "capacity": [({"pool": "mig", "what": "gpus"}, "step")],
    "coverage": [({"what": w}, "step") for w in ("data", "history", "labels")],  # "step": the whole step covered
}


def _spec_values():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "spec.yaml").write_text(SPEC)
        return spec_values(load_valid_spec(Path(d) / "spec.yaml"))


VALUES = _spec_values()


def query_name(params: dict[str, str]) -> str:
    """The usage_source method whose query PARAMS carry (at the request's step, a resolution of 1m or 1s)."""
    step = float(params["step"])
    for res in (60, 1):
        qs = Queries(VALUES, step, min(res, step))
        for name in METHODS:
            if getattr(qs, name)() == params["query"]:
                return name
    return ""


def matrix(params: dict[str, str], series: dict[str, list] | None = None) -> dict:
    """Prometheus' answer to a range query: every series of the query with a sample at each step."""
    start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
    times = [start + i * step for i in range(int((end - start) // step) + 1)]
    result = [
        {"metric": labels, "values": [[t, params["step"] if value == "step" else value] for t in times]}
        for labels, value in (series if series is not None else SERIES).get(query_name(params), [])
    ]
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


Respond = Callable[[BaseHTTPRequestHandler, dict[str, str]], None]


def send(h: BaseHTTPRequestHandler, code: int, body: bytes | str, ctype: str = "application/json", **headers: str):
    data = body.encode() if isinstance(body, str) else body
    h.send_response(code)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(data)))
    for k, v in headers.items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(data)


def answer(doc: object, code: int = 200) -> Respond:
    return lambda h, params: send(h, code, json.dumps(doc))


def good(h: BaseHTTPRequestHandler, params: dict[str, str]) -> None:
    send(h, 200, json.dumps(matrix(params)))


class Fake:
    """A Prometheus on 127.0.0.1: RESPOND answers each request; every request's params and headers are kept."""

    def __init__(self, respond: Respond = good):
        self.respond = respond
        self.requests: list[tuple[dict[str, str], dict[str, str]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                fake.requests.append((params, dict(self.headers)))
                try:
                    fake.respond(self, params)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up: what a deadline or a size cap does

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> Fake:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def spec_file(tmp_path):
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC)
    return str(p)


def run(capsys, spec_file: str, url: str, *args: str) -> tuple[int, str, str]:
    code = main(["usage", spec_file, "--prometheus", url, *RANGE, *args])
    out, err = capsys.readouterr()
    return code, out, err


def json_error(out: str) -> dict:
    doc = json.loads(out)
    assert doc["kind"] == "Error"
    return doc


# -- A. credentials never printed, never sent elsewhere ------------------------------------------------------------


def free_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _credential(kind: str, secret: str, tmp_path) -> tuple[Callable[[str], str], list[str], str]:
    """(URL builder, extra flags, the Authorization header the server must get) for a credential source."""
    import base64

    plain = lambda url: url  # noqa: E731
    if kind == "url":
        with_user = lambda url: url.replace("http://", f"http://ops:{secret}@")  # noqa: E731
        return with_user, [], "Basic " + base64.b64encode(f"ops:{secret}".encode()).decode()
    if kind == "basic-file":
        f = tmp_path / "basic"
        f.write_text(f"ops:{secret}\n")
        return plain, ["--basic-auth-file", str(f)], "Basic " + base64.b64encode(f"ops:{secret}".encode()).decode()
    if kind == "basic-user":
        f = tmp_path / "password"
        f.write_text(secret + "\n")
        flags = ["--basic-auth-file", str(f), "--basic-auth-user", "ops"]
        return plain, flags, "Basic " + base64.b64encode(f"ops:{secret}".encode()).decode()
    f = tmp_path / "token"
    f.write_text(secret + "\n")
    return plain, ["--bearer-token-file", str(f)], "Bearer " + secret


def html(h, params):
    send(h, 200, "<!doctype html><html><body>Sign in</body></html>", "text/html; charset=utf-8")


SCENARIOS: dict[str, Respond | None] = {
    "unreachable": None,
    "401": lambda h, p: send(h, 401, "Unauthorized", "text/plain", **{"WWW-Authenticate": 'Basic realm="p"'}),
    "500": lambda h, p: send(h, 500, '{"status":"error","errorType":"internal","error":"boom"}'),
    "html": html,
    "redirect": None,  # to another port (set up in the test)
    "bad-json": lambda h, p: send(h, 200, "{not json"),
    "success": good,
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("kind", ["url", "basic-file", "basic-user", "bearer-file"])
def test_a_canary_credential_appears_in_no_output(kind, scenario, spec_file, tmp_path, capsys):
    secret = canary()
    build, flags, header = _credential(kind, secret, tmp_path)
    with Fake() as other, Fake() as fake:
        if scenario == "unreachable":
            url = f"http://127.0.0.1:{free_port()}"
        else:
            url = fake.url
            if scenario == "redirect":
                fake.respond = lambda h, p: send(h, 302, "", "text/plain", Location=f"{other.url}/login?next=/")
            else:
                fake.respond = SCENARIOS[scenario]  # type: ignore[assignment]
        code, out, err = run(capsys, spec_file, build(url), *flags, "-o", "json")
        assert secret not in out and secret not in err
        doc = json.loads(out)  # a report or an error object: JSON either way
        assert secret not in json.dumps(doc)
        if scenario == "success":
            assert code == 0 and doc["prometheus"] == url  # the URL as requested: no userinfo
        else:
            assert code == 1 and doc["kind"] == "Error" and doc["exitCode"] == 1
        if scenario not in ("unreachable",):
            assert fake.requests and all(h.get("Authorization") == header for _, h in fake.requests)
        assert not any("Authorization" in h for _, h in other.requests)  # never sent to the other server


@pytest.mark.parametrize("scenario", ["unreachable", "401", "500", "html", "redirect", "bad-json"])
def test_a_library_errors_never_hold_the_password(scenario):
    """The first line of defence: with no secret registered (so no scrubbing could hide it), the exception
    texts themselves hold no password, and neither does the connection's repr."""
    secret = canary()
    with Fake() as other, Fake() as fake:
        base = f"http://127.0.0.1:{free_port()}" if scenario == "unreachable" else fake.url
        if scenario == "redirect":
            fake.respond = lambda h, p: send(h, 307, "", "text/plain", Location=f"{other.url}/api/v1/query_range")
        elif scenario != "unreachable":
            fake.respond = SCENARIOS[scenario]  # type: ignore[assignment]
        conn = prom.connect(base.replace("http://", f"http://ops:{secret}@"))
        redact.forget_all()
        assert secret not in repr(conn) and secret not in conn.display
        with pytest.raises(prom.PrometheusError) as exc:
            prom.query_range(conn, "up", usage.Window(START, END, STEP))
        assert secret not in str(exc.value)
        assert other.requests == [] or not any("Authorization" in h for _, h in other.requests)


def test_a_credential_file_errors_name_the_file_never_the_content(tmp_path):
    secret = canary()
    two = tmp_path / "token"
    two.write_text(f"{secret}\nsecond line\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # reading it would block for ever: refused, not read
    cases = [
        (dict(bearer_token_file=str(two)), "one line"),
        (dict(bearer_token_file=str(fifo)), "not a regular file"),
        (dict(bearer_token_file=str(tmp_path / "missing")), "no such file"),
        (dict(basic_auth_file=str(two)), "more than one line"),
    ]
    for kwargs, words in cases:
        redact.forget_all()
        with pytest.raises(prom.ConfigError) as exc:
            prom.connect("http://127.0.0.1:9", **kwargs)  # type: ignore[arg-type]
        assert words in str(exc.value) and secret not in str(exc.value)


def test_a_a_redirect_to_another_port_is_refused_naming_both(spec_file, capsys):
    with Fake() as other, Fake() as fake:
        fake.respond = lambda h, p: send(h, 302, "", "text/plain", Location=f"{other.url}/oauth2/start")
        code, out, err = run(capsys, spec_file, fake.url, "-o", "json")
    message = json_error(out)["message"]
    assert code == 1 and f"127.0.0.1:{fake.port}" in message and f"127.0.0.1:{other.port}" in message
    assert "sign-in" in message and other.requests == []


def test_a_a_redirect_within_the_server_is_followed_with_the_credential(spec_file, tmp_path, capsys):
    token = canary()
    f = tmp_path / "token"
    f.write_text(token)
    with Fake() as fake:

        def respond(h, params):
            if h.path.startswith("/prom/"):
                return good(h, params)
            send(h, 307, "", "text/plain", Location="/prom" + h.path)

        fake.respond = respond
        code, out, err = run(capsys, spec_file, fake.url, "--bearer-token-file", str(f), "-o", "json")
    assert code == 0, err
    assert all(h.get("Authorization") == f"Bearer {token}" for _, h in fake.requests)


# -- B. values handed to Prometheus ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--end", "nan"], "finite"),
        (["--start=-inf"], "finite"),
        (["--end", "inf"], "finite"),
        (["--start", "1733000000000", "--end", "1733003600000"], "milliseconds"),
        (["--start", "1969-12-31T00:00:00Z"], "before 1970"),
        (["--since", "99999999999w", "--start", ""], "out of range"),
        (["--step", "30m1h"], "largest to the smallest"),
        (["--step", "1.5h"], "not a duration"),
        (["--step", "0s"], "positive"),
        (["--step", "500ms"], "at least 1s"),
    ],
)
def test_b_times_and_durations_are_refused_before_any_query(flags, words, spec_file, capsys):
    with Fake() as fake:
        code = main(["usage", spec_file, "--prometheus", fake.url, *RANGE, *flags, "-o", "json"])
        out, err = capsys.readouterr()
    assert code == 2 and words in json_error(out)["message"], err
    assert fake.requests == []


def test_b_rfc3339_times_far_ahead_are_no_milliseconds(spec_file, capsys):
    with Fake() as fake:
        code = main(["usage", spec_file, "--prometheus", fake.url, "--start", "9999-12-31T00:00:00Z",
                     "--end", "9999-12-31T01:00:00Z", "-o", "json"])  # fmt: skip
        out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["end"] == "9999-12-31T01:00:00Z", err


def test_b_a_range_of_too_many_points_is_refused_with_the_numbers(spec_file, capsys):
    with Fake() as fake:
        code = main(["usage", spec_file, "--prometheus", fake.url, "--since", "40y", "--step", "1m", "-o", "json"])
        out, _ = capsys.readouterr()
    steps = 40 * 365 * 86400 // 60
    message = json_error(out)["message"]
    assert code == 2 and fake.requests == []
    assert f"{steps:,}" in message and f"{prom.DEFAULT_MAX_POINTS:,}" in message and "11,000" in message


def test_b_max_points_is_adjustable_and_cuts_requests(spec_file, capsys):
    with Fake() as fake:
        assert run(capsys, spec_file, fake.url, "--max-points", "11")[0] == 2  # 12 steps
        assert fake.requests == []
        assert run(capsys, spec_file, fake.url, "--max-points", "12")[0] == 0
    w = usage.Window(0.0, 25 * STEP, STEP)
    cut = prom.requests_for(w, prom.Limits(points_per_request=10))
    assert len(cut) == 3 and cut[0][0] == STEP and cut[-1][1] == w.end
    assert sum(round((last - first) / STEP) + 1 for first, last in cut) == 25  # every step once


def test_b_the_step_is_sent_in_full(spec_file, capsys):
    """`1h30m` is Prometheus' grammar (prometheus/common model/time.go ParseDuration); the step is sent with
    every digit (formatting with %g sent 1.23457e+06 for 1234567)."""
    with Fake() as fake:
        code, out, err = run(capsys, spec_file, fake.url, "--step", "1h30m", "--start", "0", "--end", str(5400 * 4))
        assert code == 0, err
        assert {p["step"] for p, _ in fake.requests} == {"5400"}
        flags = ("--step", "14d6h56m7s", "--resolution", "1s", "--start", "0", "--end", "12345670")
        code, *_ = run(capsys, spec_file, fake.url, *flags)
        assert {p["step"] for p, _ in fake.requests[-4:]} == {str(14 * 86400 + 6 * 3600 + 56 * 60 + 7)}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h30m", 5400), ("2w3d", 17 * 86400), ("1y", 365 * 86400), ("1500ms", 1.5), ("0", 0), ("07m", 420)],
)
def test_b_prometheus_duration_grammar_accepts(text, seconds):
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["30m2h", "300000y", "1.5h", "", "-1m", "5M", "1h1h", "1h 30m", "5", "m", "1d1w"])
def test_b_prometheus_duration_grammar_refuses(text):
    with pytest.raises(DurationError):
        parse_seconds(text)


ESCAPE = "alpha\x1b[2J\nerror: forged"


@pytest.mark.parametrize(
    ("value", "words"),
    [("NaN", "NaN"), ("+Inf", "infinite"), ("-Inf", "infinite"), ("-1", "negative"), ("abc", "not a number")],
)
def test_b_a_sample_that_is_no_finite_non_negative_number_fails_naming_its_series(value, words, spec_file, capsys):
    bad = {**SERIES, "used": [({"namespace": ESCAPE, "pool": "mig"}, value)]}
    with Fake(lambda h, p: send(h, 200, json.dumps(matrix(p, bad)))) as fake:
        code, out, err = run(capsys, spec_file, fake.url, "-o", "json")
    message = json_error(out)["message"]
    assert code == 1 and words in message
    assert 'pool="mig"' in message and "\x1b" not in err + out and "\nerror: forged" not in err
    assert len(err.strip().splitlines()) == 1


def test_b_samples_that_overflow_fail_naming_their_series(spec_file, capsys):
    huge = {
        **SERIES,
        "unweighed": [({"namespace": "alpha", "pool": "mig", "resource": "nvidia_com_mig_3g_40gb"}, "1e308")],
    }
    with Fake(lambda h, p: send(h, 200, json.dumps(matrix(p, huge)))) as fake:
        for fmt in ("json", "table", "csv"):
            code, out, err = run(capsys, spec_file, fake.url, "-o", fmt)
            assert code == 1 and "nvidia_com_mig_3g_40gb" in err and "inf" not in out.lower()


def test_b_every_figure_overflowing_is_refused_even_from_compute(spec):  # noqa: F811 (the fixture)
    """Samples finite on their own, and each series' GPU-hours too, but a figure made of them (efficiency =
    used / allocated) not: the report is refused, never an `inf`."""
    labels = {"namespace": "alpha", "pool": "mig"}
    one_hour = usage.Window(0.0, 3600.0, 3600.0)
    source = FakeSource(
        allocated=[usage.Series(labels, ((3600.0, 1e-300),))], used=[usage.Series(labels, ((3600.0, 1e308),))]
    )
    with pytest.raises(usage.UsageDataError, match="efficiency"):
        usage.compute(spec, one_hour, source)


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"status": "success"},
        {"status": "success", "data": {"resultType": "vector", "result": []}},
        {"status": "success", "data": {"resultType": "matrix", "result": {}}},
        {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": [], "values": []}]}},
        {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {"a": 1}, "values": []}]}},
        {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": {}}]}},
        {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, 2]]}]}},
        {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [["1", "2"]]}]}},
        {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[10**400, "2"]]}]}},
        {"status": "error", "errorType": "bad_data", "error": "exceeded maximum resolution"},
    ],
)
def test_b_answers_of_another_shape_fail_clearly(doc, spec_file, capsys):
    with Fake(answer(doc)) as fake:
        code, out, err = run(capsys, spec_file, fake.url, "-o", "json")
    assert code == 1 and json_error(out)["reason"] == "Failed" and "internal error" not in err


# -- C. hangs and crashes --------------------------------------------------------------------------------------


def trickle(where: str) -> Respond:
    """Headers or body one byte every 10 ms, for at most 3,000 bytes (30 s): far beyond the test's deadline."""

    def respond(h: BaseHTTPRequestHandler, params: dict[str, str]) -> None:
        if where == "body":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.end_headers()
            h.wfile.flush()
            data = b'{"status":"success","data":{"resultType":"matrix","result":[' + b" " * 3000
        else:
            data = b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 3000
        for i in range(len(data)):
            h.wfile.write(data[i : i + 1])
            h.wfile.flush()
            time.sleep(0.01)

    return respond


@pytest.mark.parametrize("where", ["headers", "body"])
def test_c_a_trickling_server_is_given_up_at_the_whole_request_deadline(where, spec_file, capsys):
    with Fake(trickle(where)) as fake:
        code, out, err = run(capsys, spec_file, fake.url, "--timeout", "300ms", "-o", "json")
    assert code == 1 and "--timeout" in json_error(out)["message"]


def test_c_an_endless_body_is_cut_at_the_size_cap(spec_file, capsys):
    def endless(h, params):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.end_headers()
        for _ in range(4096):  # 256 MiB at most, far beyond the cap given
            h.wfile.write(b" " * 65536)

    with Fake(endless) as fake:
        code, out, err = run(capsys, spec_file, fake.url, "--max-response-size", "1Mi", "-o", "json")
    assert code == 1 and "--max-response-size" in json_error(out)["message"]


def test_c_a_declared_length_above_the_cap_is_refused_unread(spec_file, capsys):
    def declared(h, params):
        send(h, 200, json.dumps(matrix(params)) + " " * 2048)

    with Fake(declared) as fake:
        code, out, err = run(capsys, spec_file, fake.url, "--max-response-size", "1Ki", "-o", "json")
        assert code == 1 and "--max-response-size" in json_error(out)["message"]
        assert run(capsys, spec_file, fake.url, "--max-response-size", "1Mi")[0] == 0


def test_c_a_range_across_a_mig_relayout_names_the_retired_profile_and_exits_3(spec_file, capsys):
    """The spec's pool has 3g.40gb instances now; the range holds 1g.10gb requests from before a re-layout
    that no recorded weight covers: the report is printed, names them, and exits 3 (not the whole truth)."""
    old = {
        **SERIES,
        "unweighed": [({"namespace": "alpha", "pool": "mig", "resource": "nvidia_com_mig_1g_10gb"}, "300")],
    }
    with Fake(lambda h, p: send(h, 200, json.dumps(matrix(p, old)))) as fake:
        code, out, err = run(capsys, spec_file, fake.url, "-o", "json")
        assert code == 3 and json.loads(out)["unweighed"] == [
            {"pool": "mig", "resource": "nvidia_com_mig_1g_10gb", "namespace": "alpha", "unitHours": 1.0}
        ]
        assert "not the whole truth" in err
        code, out, err = run(capsys, spec_file, fake.url)
    assert code == 3 and "no weight: alpha held 1.00 unit-hours of nvidia_com_mig_1g_10gb in pool mig" in out


def test_c_compute_names_an_unknown_profile_never_asserts(spec):  # noqa: F811 (the fixture)
    unknown = [_series({"GPU_I_PROFILE": "7g.80gb"}, [STEP] * 12)]
    report = usage.compute(spec, usage.Window(0.0, 12 * STEP, STEP), FakeSource(unknown_profiles=unknown))
    assert report.unknown_profiles == {"7g.80gb": pytest.approx(1.0)} and report.untrusted


# -- D. clear messages -------------------------------------------------------------------------------------------


def test_d_an_html_page_says_what_came_back(spec_file, capsys):
    with Fake(html) as fake:
        code, out, err = run(capsys, spec_file, fake.url, "-o", "json")
    message = json_error(out)["message"]
    assert code == 1 and "HTTP 200" in message and "text/html" in message and "HTML page" in message
    assert "sign-in proxy" in message and fake.url in message


def test_d_an_html_error_page_says_what_came_back(spec_file, capsys):
    with Fake(lambda h, p: send(h, 502, "<html><body>Bad gateway</body></html>", "text/html")) as fake:
        code, out, err = run(capsys, spec_file, fake.url)
    assert code == 1 and "HTTP 502" in err and "HTML page" in err


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("localhost:9090", "give the URL with its scheme, e.g. http://localhost:9090"),
        ("127.0.0.1:9090", "give the URL with its scheme"),
        ("ftp://127.0.0.1/", "only http:// and https://"),
        ("file:///etc/passwd", "only http:// and https://"),
        ("http://127.0.0.1:99999", "not a valid URL"),
        ("http://127.0.0.1:9090/?token=abc", "query string"),
        ("http://127.0.0.1:9090/a b", "spaces"),
    ],
)
def test_d_an_unusable_url_is_a_usage_error(url, words, spec_file, capsys):
    code, out, err = run(capsys, spec_file, url, "-o", "json")
    assert code == 2 and words in json_error(out)["message"]


def test_d_401_says_whether_credentials_were_given(spec_file, tmp_path, capsys):
    f = tmp_path / "token"
    f.write_text(canary())
    with Fake(SCENARIOS["401"]) as fake:  # type: ignore[arg-type]
        assert "wants credentials" in run(capsys, spec_file, fake.url)[2]
        assert "--bearer-token-file were refused" in run(capsys, spec_file, fake.url, "--bearer-token-file", str(f))[2]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_d_tls_an_untrusted_certificate_names_the_flags_and_ca_file_trusts_it(spec_file, tmp_path, capsys):
    import ssl

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    with Fake() as fake:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        fake.server.socket = context.wrap_socket(fake.server.socket, server_side=True)
        url = f"https://127.0.0.1:{fake.port}"
        code, out, err = run(capsys, spec_file, url)
        assert code == 1 and "--ca-file" in err and "--insecure-skip-tls-verify" in err
        assert run(capsys, spec_file, url, "--ca-file", str(cert))[0] == 0
        assert run(capsys, spec_file, url, "--insecure-skip-tls-verify")[0] == 0
        assert run(capsys, spec_file, url, "--ca-file", str(key))[0] == 2  # a key, not a certificate


# -- E. every failure a CommandError / UsageError --------------------------------------------------------------------


def test_e_an_invalid_spec_prints_a_json_error(tmp_path, capsys):
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC.replace("tiers:", "tiers: 3\nx:"))
    code, out, err = run(capsys, str(p), "http://127.0.0.1:9", "-o", "json")
    assert code == 1 and json_error(out)["exitCode"] == 1


def test_b_a_long_range_is_asked_a_day_at_a_time(spec_file, capsys):
    """Each step is evaluated step/resolution times inside Prometheus (its --query.max-samples bounds what one
    request may load), so every query is sent a day of steps at a time: two days are two requests per query,
    and the steps of the two add up to the range, each once."""
    with Fake() as fake:
        code, out, err = run(capsys, spec_file, fake.url, "--start", "0", "--end", str(2 * 86400), "--step", "1h")
    assert code == 0, err
    by_query: dict[str, list[tuple[float, float]]] = {}
    for params, _ in fake.requests:
        by_query.setdefault(params["query"], []).append((float(params["start"]), float(params["end"])))
    assert len(by_query) == len(METHODS)
    for spans in by_query.values():
        assert sorted(spans) == [(3600.0, 86400.0), (86400.0 + 3600.0, 2 * 86400.0)]
