"""The release recipe (.github/workflows/release.yml, issue 41 item 1): on a tag vX.Y.Z it checks the tag is
the package's version, builds the sdist and the wheel, smoke-tests the wheel, publishes to PyPI with trusted
publishing (only the publish job holds `id-token: write`, behind the `pypi` environment) and attaches the
files to a GitHub release. actionlint finds nothing in it; that the sdist builds the same wheel is in
tests/test_wheel.py."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.test_workflow import _lint, actionlint  # noqa: F401 (the fixture)

RELEASE = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "release.yml"


def _doc() -> dict:
    return yaml.safe_load(RELEASE.read_text())


def test_actionlint_passes_on_the_release_workflow(actionlint):  # noqa: F811
    r = _lint(actionlint, RELEASE)
    assert r.returncode == 0, r.stdout + r.stderr


def test_it_runs_on_version_tags_only():
    doc = _doc()
    on = doc[True] if True in doc else doc["on"]  # PyYAML reads the key `on` as True
    assert on == {"push": {"tags": ["v*"]}}


def test_only_the_publish_job_can_mint_an_oidc_token():
    doc = _doc()
    assert doc["permissions"] == {"contents": "read"}
    jobs = doc["jobs"]
    holders = {name for name, job in jobs.items() if (job.get("permissions") or {}).get("id-token") == "write"}
    assert holders == {"pypi"}
    pypi = jobs["pypi"]
    assert pypi["environment"]["name"] == "pypi"  # the environment PyPI's trusted publisher names
    assert pypi["needs"] == "build"
    (publish,) = [s for s in pypi["steps"] if str(s.get("uses", "")).startswith("pypa/gh-action-pypi-publish@")]
    assert "with" not in publish or "password" not in publish["with"]  # no API token: trusted publishing


def test_the_build_checks_the_tag_and_builds_both_distributions():
    steps = _doc()["jobs"]["build"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert '[ "$TAG" != "v$version" ]' in runs and "exit 1" in runs
    assert "python -m build --outdir dist/" in runs  # sdist and wheel (build's default is both)
    assert "gpupool init" in runs and "gpupool validate" in runs
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "dist/"
