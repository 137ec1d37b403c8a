"""The quantity oracle of tests/test_quantity.py, checked against Kubernetes' own ParseQuantity.

A ten-line Go program around k8s.io/apimachinery's resource.ParseQuantity (the version the e2e API server
is built from, so already in the Go module cache) parses a few thousand generated strings; the
transliteration must agree with it on every one, and gpupool's parser wherever gpupool is not stricter
on purpose.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from tests.test_quantity import gpupool_parse, k8s_parse, stricter_on_purpose

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
ORACLE = """// One candidate quantity per line on stdin; prints "ok NUM/DEN" or "err" per line.
package main

import (
	"bufio"
	"fmt"
	"math/big"
	"os"

	"k8s.io/apimachinery/pkg/api/resource"
)

func main() {
	in, out := bufio.NewScanner(os.Stdin), bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		q, err := resource.ParseQuantity(in.Text())
		if err != nil {
			fmt.Fprintln(out, "err")
			continue
		}
		d := q.AsDec()
		ten := big.NewInt(10)
		r := new(big.Rat)
		if d.Scale() >= 0 {
			r.SetFrac(d.UnscaledBig(), new(big.Int).Exp(ten, big.NewInt(int64(d.Scale())), nil))
		} else {
			r.SetInt(new(big.Int).Mul(d.UnscaledBig(), new(big.Int).Exp(ten, big.NewInt(int64(-d.Scale())), nil)))
		}
		fmt.Fprintln(out, "ok", r.RatString())
	}
}
"""


def _apimachinery_version() -> str:
    for line in (REPO / "toolchain" / "versions.env").read_text().splitlines():
        if line.startswith("KUBERNETES_VERSION="):
            return "v0." + line.split("=", 1)[1].strip().lstrip("v").split(".", 1)[1]  # v1.36.3 -> v0.36.3
    raise AssertionError("KUBERNETES_VERSION missing from toolchain/versions.env")


@pytest.fixture(scope="module")
def parse_in_go(tmp_path_factory):
    if not shutil.which("go"):
        if os.environ.get("GPUPOOL_REQUIRE_E2E", "") not in ("", "0", "false", "no"):
            pytest.fail("go is needed for the Kubernetes quantity oracle")
        pytest.skip("go not found")
    d = tmp_path_factory.mktemp("quantity-oracle")
    (d / "main.go").write_text(ORACLE)
    (d / "go.mod").write_text(
        f"module gpupool.local/quantity-oracle\n\ngo 1.26.0\n\nrequire k8s.io/apimachinery {_apimachinery_version()}\n"
    )
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOWORK": "off"}
    for cmd in (["go", "mod", "tidy"], ["go", "build", "-o", "oracle", "."]):
        p = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr

    def parse(texts: list[str]) -> list[Fraction | None]:
        p = subprocess.run(
            [str(d / "oracle")], input="".join(t + "\n" for t in texts), capture_output=True, text=True, check=True
        )
        return [None if line == "err" else Fraction(line.split()[1]) for line in p.stdout.splitlines()]

    return parse


def _samples(n: int) -> list[str]:
    rng = random.Random(20261201)
    suffixes = [
        "",
        "n",
        "u",
        "m",
        "k",
        "M",
        "G",
        "T",
        "P",
        "E",
        "Ki",
        "Mi",
        "Gi",
        "Ti",
        "Pi",
        "Ei",
        "K",
        "mi",
        "e",
        "E",
        "e+",
        "iB",
        "e3",
        "E-2",
        "e+6",
        "e-9",
        "e12",
        "E0",
    ]
    digits = lambda k: "".join(rng.choice("0123456789") for _ in range(rng.randint(0, k)))  # noqa: E731
    out = []
    for _ in range(n):
        if rng.random() < 0.8:
            out.append(
                rng.choice(["", "", "+", "-"])
                + digits(7)
                + rng.choice(["", "", "."])
                + digits(5)
                + rng.choice(suffixes)
            )
        else:
            out.append("".join(rng.choice("0123456789.+-eEinumkKMGTPi") for _ in range(rng.randint(1, 8))))
    return [s for s in out if s and "\n" not in s]


def test_the_transliteration_and_gpupool_agree_with_kubernetes(parse_in_go):
    samples = _samples(4000) + ["32000000000n", "1u", "0.1n", "9Ei", "8Ei", "+", "k", "e5", ".5", "5.", "1E"]
    go = parse_in_go(samples)
    assert len(go) == len(samples)
    accepted = 0
    for text, theirs in zip(samples, go):
        oracle = k8s_parse(text)
        assert (oracle[0] if oracle else None) == theirs, f"{text!r}: transliteration {oracle}, Kubernetes {theirs}"
        ours = gpupool_parse(text)
        if ours is not None:
            accepted += 1
            assert ours == theirs, text
        elif theirs is not None:
            assert stricter_on_purpose(text, oracle[1]), f"{text!r}: Kubernetes reads {theirs}, gpupool refuses"
    assert accepted > 1000  # the samples exercise the accepting side, not only errors
