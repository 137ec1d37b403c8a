"""The CI recipe (.github/workflows/gpupool.yml): actionlint finds nothing, and the PR job is the one docs/howto/ci.md
describes: no protected environment, validate as annotations, the diff comment with the full diff as an
artifact and the preview folded in.

actionlint is built from its Go module by `make tools` (tools/build.sh, pin in tools/versions.env);
`make test` sets GPUPOOL_ACTIONLINT and GPUPOOL_REQUIRE_TOOLS=1, so there a missing binary fails."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

# Needs a binary make test builds: run after the build, with the e2e tests (ci/test.sh).
pytestmark = pytest.mark.needs_tools

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "gpupool.yml"


@pytest.fixture(scope="module")
def actionlint() -> str:
    path = os.environ.get("GPUPOOL_ACTIONLINT") or shutil.which("actionlint")
    if not path:
        built = subprocess.run(
            ["bash", str(ROOT / "tools" / "build.sh"), "--print-bin-dir"], capture_output=True, text=True
        ).stdout.strip()
        path = str(Path(built) / "actionlint") if built else ""
    if path and Path(path).is_file():
        return path
    if os.environ.get("GPUPOOL_REQUIRE_TOOLS"):
        pytest.fail(f"GPUPOOL_REQUIRE_TOOLS is set but actionlint is missing ({path or 'not built'}; make tools)")
    pytest.skip("actionlint not built (make tools)")


def _lint(actionlint: str, path: Path) -> subprocess.CompletedProcess:
    # -shellcheck= / -pyflakes=: only actionlint's own checks, whatever else is on PATH
    return subprocess.run(
        [actionlint, "-no-color", "-shellcheck=", "-pyflakes=", str(path)], capture_output=True, text=True, cwd=ROOT
    )


def test_actionlint_passes(actionlint):
    r = _lint(actionlint, WORKFLOW)
    assert r.returncode == 0, r.stdout + r.stderr


def test_actionlint_catches_a_broken_workflow(actionlint, tmp_path):
    """A control: the check can fail (an unknown step output and a bad expression are reported)."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    doc = yaml.safe_load(WORKFLOW.read_text())
    steps = doc["jobs"]["plan"]["steps"]
    steps.append({"name": "broken", "if": "${{ steps.nope.outputs.x == }}", "run": "true"})
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = _lint(actionlint, bad)
    assert r.returncode == 1 and "bad.yml" in r.stdout


def _jobs():
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]


def test_pr_job_needs_no_protected_environment():
    jobs = _jobs()
    assert "environment" not in jobs["plan"]  # required reviewers would gate every PR
    assert jobs["up"]["environment"] == "${{ matrix.stack }}"  # the deploy job is the one gated


def test_pr_job_annotates_comments_and_uploads():
    steps = _jobs()["plan"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert 'gpupool validate "$SPEC" -o github' in runs
    assert "--full-output gpupool-diff-full.md" in runs and "--preview-file pulumi-preview.txt" in runs
    assert "--format" not in runs
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert uploads and uploads[0]["with"]["path"] == "gpupool-diff-full.md"
    comments = [s for s in steps if str(s.get("uses", "")).startswith("marocchino/sticky-pull-request-comment@")]
    assert len(comments) == 2 and {c["with"]["path"] for c in comments} == {"gpupool-diff.md"}
    preview = next(s for s in steps if s.get("id") == "preview")
    assert preview.get("continue-on-error") is True
    # the artifact is the full diff of the last run, the one with the preview in it
    with_preview = next(i for i, s in enumerate(steps) if "--preview-file" in s.get("run", ""))
    assert steps.index(uploads[0]) > with_preview


def test_diff_comment_heading_names_stack_commit_and_artifact():
    """Both diff runs pass the stack, the PR's head commit and the run's URL (its artifacts hold the full diff
    under the name the comment gives), so the dev and prod comments tell themselves apart."""
    steps = _jobs()["plan"]["steps"]
    diffs = [s for s in steps if "gpupool diff --base" in s.get("run", "")]
    assert len(diffs) == 2
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "gpupool-diff-${{ matrix.stack }}"  # = the name the heading gives
    for s in diffs:
        assert '--stack "$STACK" --commit "$HEAD_SHA" --artifact-url "$RUN_URL"' in s["run"]
        env = s["env"]
        assert env["STACK"] == "${{ matrix.stack }}"
        assert env["HEAD_SHA"] == "${{ github.event.pull_request.head.sha }}"
        assert env["RUN_URL"].endswith("/actions/runs/${{ github.run_id }}")


@pytest.mark.parametrize("which", ["project", "scaffold"])
def test_names_the_shell_writes_are_cleared_of_planted_links_first(which):
    """The shell's `>` follows a link a pull request planted at gpupool-diff.md (gpupool's own writes refuse
    one): the step that first writes these names removes them, before anything writes them."""
    if which == "project":
        steps = _jobs()["plan"]["steps"]
    else:
        from gpupool import scaffold

        steps = yaml.safe_load(scaffold.files("team", "0", "dev")[".github/workflows/gpupool.yml"])["jobs"]["plan"][
            "steps"
        ]
    runs = [s.get("run", "") for s in steps]
    first = next(i for i, r in enumerate(runs) if "gpupool-diff.md" in r or "pulumi-preview.txt" in r)
    clearing = runs[first].split("gpupool diff", 1)[0]
    assert "rm -f gpupool-diff.md gpupool-diff-full.md pulumi-preview.txt" in clearing
