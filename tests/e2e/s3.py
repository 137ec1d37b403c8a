"""A local S3-compatible object store for the state-backend tests: gofakes3 (``cmd/gofakes3``, built by
``toolchain/build.sh`` next to the rest of the toolchain) on loopback, with one bucket that has object
versioning turned on (as docs/howto/ci.md recommends for the state bucket).

Its memory backend (``s3mem``), because it is the one that behaves like S3 where Pulumi depends on it: a PUT
replaces an object whole under one lock (readers see the old or the new object), a listing sees every
completed PUT, and it keeps versions. The objects live as long as the server process, which here is the
test module. The two on-disk backends are not usable for this: ``bolt`` crashes with SIGBUS on the
CopyObject Pulumi makes for every checkpoint's ``.bak`` (gofakes3 v1.2.0 ``backend.go`` CopyObject hashes
``c.Hash``, bytes that ``s3bolt.GetObject`` decoded in place from bbolt's mmap, after the read transaction
ended); ``fs`` writes an object by truncating and rewriting its file (``s3afero`` PutObject), which S3
never shows a reader.

The backend URL is the one a user writes for a store that is not AWS (gocloud.dev ``s3blob``, aws-sdk-go-v2):
``s3://BUCKET/PREFIX?endpoint=http://HOST:PORT&s3ForcePathStyle=true&region=us-east-1``; ``endpoint`` and
``region`` are read by ``gocloud.dev/aws.V2ConfigFromURLParams``, ``s3ForcePathStyle`` (or
``use_path_style``) by ``s3blob.URLOpener``. Pulumi (``diy.translateLegacyS3Params``) adds
``request_checksum_calculation=when_required`` itself when an endpoint is set;
``response_checksum_validation=when_required`` only silences the SDK's "Response has no supported
checksum" warning on every read (gofakes3 returns no ``x-amz-checksum-*`` headers).

gofakes3 checks no request signature, so any key pair works; the tests read and list the bucket with
plain unsigned HTTP (path style), independently of Pulumi.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

BINARY = "gofakes3"
# What a client of an S3-compatible store needs besides the URL: credentials (any, see above), and no
# instance-metadata lookups (the SDK would otherwise try 169.254.169.254 for a region or credentials).
CLIENT_ENV = {
    "AWS_ACCESS_KEY_ID": "gpupool-e2e",
    "AWS_SECRET_ACCESS_KEY": "gpupool-e2e-secret",
    "AWS_EC2_METADATA_DISABLED": "true",
}


VERSIONING_ON = (
    b'<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    b"<Status>Enabled</Status></VersioningConfiguration>"
)


class S3Error(RuntimeError):
    pass


class FakeS3:
    """``gofakes3 -backend mem`` on 127.0.0.1 (a port the server picks), with one versioned bucket."""

    def __init__(self, binary: Path, workdir: Path, bucket: str = "gpupool-state"):
        self.binary, self.workdir, self.bucket = binary, workdir, bucket
        self.log_path = workdir / "gofakes3.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self, timeout: float = 30) -> FakeS3:
        self.workdir.mkdir(parents=True, exist_ok=True)
        host = "127.0.0.1:0"
        log = open(self.log_path, "ab")
        start = log.tell()
        self.proc = subprocess.Popen(
            [str(self.binary), "-backend", "mem", "-host", host] + ["-initialbucket", self.bucket, "-quiet"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                m = re.search(rb"using port: (\d+)", f.read())
            if m:
                self.port = int(m.group(1))
                self._request("PUT", "?versioning", VERSIONING_ON)
                return self
            if self.proc.poll() is not None:
                raise S3Error(f"gofakes3 exited ({self.proc.returncode}): {self.log_tail()}")
            time.sleep(0.1)
        raise S3Error(f"gofakes3 did not start within {timeout}s: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # ---------------------------------------------------------------- URLs
    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def backend_url(self, prefix: str) -> str:
        query = urllib.parse.urlencode(
            {
                "endpoint": self.endpoint,
                "s3ForcePathStyle": "true",
                "region": "us-east-1",
                "response_checksum_validation": "when_required",
            }
        )
        return f"s3://{self.bucket}/{prefix}?{query}"

    # ---------------------------------------------------------------- plain HTTP (path style, unsigned)
    def _request(self, method: str, path: str, data: bytes | None = None) -> bytes:
        req = urllib.request.Request(f"{self.endpoint}/{self.bucket}{path}", data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            raise S3Error(f"{method} {path}: HTTP {e.code}: {e.read()[:300]!r}") from e

    def list(self, prefix: str) -> list[str]:
        """Every key under PREFIX (ListObjectsV2, all pages)."""
        keys: list[str] = []
        token = ""
        while True:
            q = {"list-type": "2", "prefix": prefix, **({"continuation-token": token} if token else {})}
            root = ET.fromstring(self._request("GET", "?" + urllib.parse.urlencode(q)))
            for el in root.iter():  # the S3 namespace (or none): match local names
                el.tag = el.tag.rsplit("}", 1)[-1]
            keys += [c.findtext("Key") or "" for c in root.findall("Contents")]
            token = root.findtext("NextContinuationToken") or ""
            if root.findtext("IsTruncated") != "true" or not token:
                return keys

    def versions(self, key: str) -> list[str]:
        """The version ids the bucket keeps of KEY (ListObjectVersions; one page is enough here)."""
        q = {"versions": "", "prefix": key}
        root = ET.fromstring(self._request("GET", "?" + urllib.parse.urlencode(q)))
        for el in root.iter():
            el.tag = el.tag.rsplit("}", 1)[-1]
        return [v.findtext("VersionId") or "" for v in root.findall("Version") if v.findtext("Key") == key]

    def get(self, key: str) -> bytes:
        return self._request("GET", "/" + urllib.parse.quote(key))

    def put(self, key: str, body: bytes) -> None:
        self._request("PUT", "/" + urllib.parse.quote(key), body)
