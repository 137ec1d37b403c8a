"""Every input read is bounded (issue 21): a size cap per file and per run (--max-file-size, --max-input-size),
no FIFO or device read on any path (HEAD, BASE, stdin), one alias budget for all the files of a run, and
`diff --base` reads only the blobs the spec can name. Bounds are checked by counting bytes and values, never
by timing; the cases that read forever on the old code run in a child process under a 1 GB address-space
limit, so a failure is a MemoryError, not a hung machine."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gpupool.cli.main import main
from gpupool.spec import input_limits, loader
from tests.test_diff import stack
from tests.test_diff_gitspec import _commit, _git

ROOT = Path(__file__).resolve().parent.parent


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _gpupool(*args: str, cwd: Path, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpupool", *args],
        cwd=cwd,
        stdin=stdin,
        capture_output=True,
        text=True,
        preexec_fn=_limited,
        timeout=600,  # a guard against a hang only; nothing here is timed
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture
def dev(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    stack(root / "stacks" / "dev")
    monkeypatch.chdir(root)
    return root


def test_stdin_that_is_a_device_is_refused(dev):
    with open("/dev/zero", "rb") as zero:
        p = _gpupool("validate", "-", cwd=dev, stdin=zero)
    assert p.returncode == 1, p.stderr
    assert "<stdin>:1:1: error: standard input is a device" in p.stderr and "[GP022]" in p.stderr


def test_stdin_from_a_pipe_is_read_within_the_cap(dev):
    text = (dev / "stacks/dev/spec.yaml").read_text()
    ok = subprocess.run(
        [sys.executable, "-m", "gpupool", "validate", "-", "--max-file-size", "64Mi"],
        input=text,
        cwd=dev / "stacks/dev",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert "[GP022]" not in ok.stderr
    small = subprocess.run(
        [sys.executable, "-m", "gpupool", "validate", "-", "--max-file-size", "100"],
        input=text,
        cwd=dev / "stacks/dev",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert small.returncode == 1 and "larger than 100 bytes" in small.stderr and "--max-file-size" in small.stderr


@pytest.mark.parametrize("kind", ["zero", "fifo"])
def test_a_tenant_file_that_is_a_device_or_a_fifo_is_not_read(dev, kind, tmp_path):
    tenants = dev / "stacks/dev/tenants"
    if kind == "zero":
        os.symlink("/dev/zero", tenants / "zero.yaml")
    else:
        os.mkfifo(tmp_path / "fifo")
        os.symlink(tmp_path / "fifo", tenants / "fifo.yaml")  # outside the stack too: GP806 before any open
        os.mkfifo(tenants / "inside.yaml")
    p = _gpupool("validate", "stacks/dev/spec.yaml", cwd=dev)
    assert "MemoryError" not in p.stderr and "internal error" not in p.stderr, p.stderr
    assert "is not a regular file" in p.stderr or "outside the stack" in p.stderr


def test_the_spec_named_as_a_device_is_refused(dev):
    p = _gpupool("validate", "/dev/zero", cwd=dev)
    assert p.returncode in (1, 2) and "MemoryError" not in p.stderr and "internal error" not in p.stderr


def test_per_file_and_per_run_caps(dev, capsys):
    tenants = dev / "stacks/dev/tenants"
    padding = "# " + "x" * 1000 + "\n"
    big = tenants / "notebooks.yaml"
    big.write_text(big.read_text() + padding * 3000)  # ~3 MB
    assert main(["validate", "stacks/dev/spec.yaml", "--max-file-size", "1Mi", "--max-input-size", "8Mi"]) == 1
    err = capsys.readouterr().err
    assert "notebooks.yaml:1:1: error: not read: larger than 1,048,576 bytes" in err and "[GP022]" in err
    assert main(["--max-file-size", "4Mi", "--max-input-size", "4Mi", "validate", "stacks/dev/spec.yaml"]) == 0
    capsys.readouterr()
    assert main(["validate", "stacks/dev/spec.yaml", "--max-input-size", "2Mi", "--max-file-size", "8Mi"]) == 1
    assert "exceed 2,097,152 bytes in all" in capsys.readouterr().err


def test_the_value_budget_is_shared_by_every_file_of_a_run(dev, monkeypatch, capsys):
    """Each file alone fits the budget; together they do not. The old per-file budget let 80 tiny alias bombs
    (32 KB in one pull request) each expand to two million values."""
    tenants = dev / "stacks/dev/tenants"
    bomb = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    bomb += "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"  # ~1,100 values
    for i in range(5):
        (tenants / f"bomb-{i}.yaml").write_text(f"name: bomb-{i}\n" + bomb)
    monkeypatch.setattr(input_limits, "LIMITS", input_limits.Limits(values=4000))
    report = loader.load_spec("stacks/dev/spec.yaml").report
    refused = [d for d in report.sorted() if d.rule == "GP006"]
    assert refused and "in all" in refused[0].message
    monkeypatch.setattr(input_limits, "LIMITS", input_limits.Limits(values=100_000))
    assert not [d for d in loader.load_spec("stacks/dev/spec.yaml").report.sorted() if d.rule == "GP006"]


# -- diff --base --------------------------------------------------------------------------------------


@pytest.fixture
def repo(dev):
    _git(dev, "init", "-q")
    return dev


def test_base_reads_only_the_blobs_the_spec_can_name(repo, monkeypatch, capsys):
    """A BASE whose tenantFiles climbs out (`../../`, GP805) made diff read every blob of the repository."""
    from gpupool.analysis import gitspec

    (repo / "unrelated.bin").write_bytes(b"\0" * 1_000_000)
    (repo / "stacks/dev/notes.txt").write_text("not a tenant file")
    spec = repo / "stacks/dev/spec.yaml"
    head = spec.read_text()
    assert "tenantFiles:\n- tenants/\n" in head
    spec.write_text(head.replace("tenantFiles:\n", "tenantFiles:\n- ../../\n"))
    _commit(repo, "base")
    spec.write_text(head)
    requested: list[str] = []
    real = gitspec._cat_blobs

    def spy(oids, root):
        requested.extend(oids)
        return real(oids, root)

    monkeypatch.setattr(gitspec, "_cat_blobs", spy)
    main(["diff", "--base", "HEAD", "stacks/dev/spec.yaml"])
    err = capsys.readouterr().err
    big = _git(repo, "rev-parse", "HEAD:unrelated.bin").strip()
    notes = _git(repo, "rev-parse", "HEAD:stacks/dev/notes.txt").strip()
    assert big not in requested and notes not in requested
    assert "GP805" in err  # the base's entry is refused as HEAD's would be


def test_a_base_spec_linked_to_a_device_is_refused(repo):
    spec = repo / "stacks/dev/spec.yaml"
    head = spec.read_text()
    spec.unlink()
    os.symlink("/dev/zero", spec)
    _commit(repo, "base")
    spec.unlink()
    spec.write_text(head)
    p = _gpupool("diff", "--base", "HEAD", "stacks/dev/spec.yaml", cwd=repo)
    assert "MemoryError" not in p.stderr and "internal error" not in p.stderr, p.stderr
    assert "is not a regular file" in p.stderr


def test_a_base_blob_above_the_cap_is_never_read(repo, monkeypatch, capsys):
    from gpupool.analysis import gitspec

    tenant = repo / "stacks/dev/tenants/notebooks.yaml"
    head = tenant.read_text()
    tenant.write_text(head + ("# " + "x" * 1000 + "\n") * 2000)
    _commit(repo, "base")
    tenant.write_text(head)
    requested: list[str] = []
    real = gitspec._cat_blobs
    monkeypatch.setattr(gitspec, "_cat_blobs", lambda oids, root: requested.extend(oids) or real(oids, root))
    main(["diff", "--base", "HEAD", "stacks/dev/spec.yaml", "--max-file-size", "1Mi", "--max-input-size", "8Mi"])
    assert _git(repo, "rev-parse", "HEAD:stacks/dev/tenants/notebooks.yaml").strip() not in requested
    assert "larger than 1,048,576 bytes" in capsys.readouterr().err


def test_the_default_caps_are_what_every_command_handles_in_60_s(dev, capsys):
    """The default run cap is set by the slowest command, render (docs/reference/cli.md, "Input limits": 39 s for 512 KiB
    of tenant files, 124 s for 1 MiB on 2 loaded cores); 32 MiB let through what no command handled in 60 s.
    A 600 KB stack is refused by default, located, and read when the flags raise the caps."""
    from gpupool.spec.input_limits import MAX_FILE_BYTES, MAX_RUN_BYTES

    assert MAX_RUN_BYTES == MAX_FILE_BYTES == 512 << 10
    tenants = dev / "stacks/dev/tenants"
    template = (tenants / "notebooks.yaml").read_text()
    for i in range(600_000 // len(template) + 1):
        (tenants / f"bulk-{i}.yaml").write_text(template.replace("name: notebooks", f"name: bulk-{i}"))
    assert main(["validate", "stacks/dev/spec.yaml"]) == 1
    err = capsys.readouterr().err
    assert "[GP022]" in err and "exceed 524,288 bytes in all" in err
    assert main(["validate", "stacks/dev/spec.yaml", "--max-input-size", "1Mi"]) in (0, 1)
    assert "[GP022]" not in capsys.readouterr().err
    docs = (Path(__file__).resolve().parents[1] / "docs/reference/cli.md").read_text()
    assert f"no spec or tenant file above {MAX_FILE_BYTES >> 10} KiB" in docs
    assert f"at most {MAX_RUN_BYTES >> 10} KiB for all the files of one spec" in docs


def test_the_caps_can_be_raised_from_the_environment(dev, monkeypatch, capsys):
    """The Pulumi program has no command line: $GPUPOOL_MAX_INPUT_SIZE / $GPUPOOL_MAX_FILE_SIZE set the caps
    for it (limits_from_env, what input_limits.LIMITS starts as) and are the CLI flags' defaults; a malformed value
    keeps the default rather than lifting the cap; a flag still wins."""

    env = {"GPUPOOL_MAX_INPUT_SIZE": "2Mi", "GPUPOOL_MAX_FILE_SIZE": "1Mi"}
    assert input_limits.limits_from_env(env) == input_limits.Limits(1 << 20, 2 << 20)
    assert input_limits.limits_from_env({"GPUPOOL_MAX_INPUT_SIZE": "lots"}) == input_limits.Limits()
    tenants = dev / "stacks/dev/tenants"
    (tenants / "notebooks.yaml").write_text((tenants / "notebooks.yaml").read_text() + "# " + "x" * 600_000 + "\n")
    assert main(["validate", "stacks/dev/spec.yaml"]) == 1
    assert "[GP022]" in capsys.readouterr().err
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert main(["validate", "stacks/dev/spec.yaml"]) == 0
    capsys.readouterr()
    assert main(["validate", "stacks/dev/spec.yaml", "--max-file-size", "512Ki"]) == 1
    assert "larger than 524,288 bytes" in capsys.readouterr().err
