"""The spec validated once per `gpupool stacks` command (gpupool.deploy.validated_spec): the programs take the
command's model only from a file this very command signed, and only while the files it was built from are as they
were; otherwise they validate, as before. The expected models come from validating the files afresh."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest

from gpupool.deploy import validated_spec as vs
from gpupool.rules.engine import validate_file

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path) -> Path:
    d = tmp_path / "project"
    shutil.copytree(REPO / "stacks" / "dev", d / "stacks" / "dev")
    return d


def _spec(project: Path) -> Path:
    return project / "stacks" / "dev" / "spec.yaml"


def _offer(project: Path) -> vs.Offer:
    offered = vs.offer(project, _spec(project), validate_file(str(_spec(project))))
    assert offered is not None
    return offered


def test_a_program_takes_the_command_s_model_and_warnings(project):
    offered = _offer(project)
    taken = vs.take(_spec(project), offered.env)
    fresh = validate_file(str(_spec(project)))
    assert taken is not None and taken[0] == fresh.spec
    assert taken[1] == [d.render() for d in fresh.report.sorted() if not d.is_error]
    # also through a relative path, as a program run in the project directory names it
    cwd = os.getcwd()
    os.chdir(project)
    try:
        assert vs.take(Path("stacks/dev/spec.yaml"), offered.env) is not None
    finally:
        os.chdir(cwd)


def test_nothing_is_taken_without_the_command_s_key(project):
    offered = _offer(project)
    assert vs.take(_spec(project), {}) is None
    assert vs.take(_spec(project), {vs.PATH_ENV: offered.env[vs.PATH_ENV]}) is None
    other = {**offered.env, vs.KEY_ENV: os.urandom(32).hex()}
    assert vs.take(_spec(project), other) is None
    assert vs.take(_spec(project), {**offered.env, vs.KEY_ENV: "not hex"}) is None


class _Planted:
    """What a pickle committed to the repository could run on loading."""

    ran: list[str] = []

    def __reduce__(self):
        return (_Planted.ran.append, ("unpickled",))


def test_a_planted_or_altered_file_is_never_unpickled(project):
    offered = _offer(project)
    path = Path(offered.env[vs.PATH_ENV])
    blob = path.read_bytes()
    # the same payload, a byte changed: the tag no longer holds
    path.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
    assert vs.take(_spec(project), offered.env) is None
    # a file with the right header but no tag made under this run's key
    evil = pickle.dumps(_Planted())
    path.write_bytes(vs.MAGIC + b"\0" * 32 + evil)
    assert vs.take(_spec(project), offered.env) is None
    path.write_bytes(evil)
    assert vs.take(_spec(project), offered.env) is None
    assert _Planted.ran == []


@pytest.mark.parametrize(
    "change",
    ["edit a tenant", "add a tenant file", "add a skipped file", "edit the spec", "other spec"],
)
def test_changed_inputs_mean_the_program_validates(project, change):
    offered = _offer(project)
    spec = _spec(project)
    tenants = spec.parent / "tenants"
    if change == "edit a tenant":
        first = sorted(tenants.glob("*.yaml"))[0]
        first.write_text(first.read_text() + "\n# edited\n")
    elif change == "add a tenant file":
        shutil.copy(sorted(tenants.glob("*.yaml"))[0], tenants / "zz-copy.yaml")
    elif change == "add a skipped file":
        (tenants / "notes.txt").write_text("not a tenant\n")
    elif change == "edit the spec":
        spec.write_text(spec.read_text() + "\n# edited\n")
    else:
        shutil.copytree(spec.parent, project / "stacks" / "other")
        spec = project / "stacks" / "other" / "spec.yaml"
    assert vs.take(spec, offered.env) is None


def test_an_entry_that_now_leads_out_of_the_stack_is_not_read(project, tmp_path):
    offered = _offer(project)
    tenants = _spec(project).parent / "tenants"
    outside = tmp_path / "outside"
    shutil.move(tenants, outside)
    tenants.symlink_to(outside, target_is_directory=True)
    assert vs.take(_spec(project), offered.env) is None


def test_withdraw_removes_only_what_the_command_wrote(project):
    offered = _offer(project)
    path = Path(offered.env[vs.PATH_ENV])
    assert path.parent == project / vs.DIRECTORY and path.is_file()
    offered.withdraw()
    assert not (project / vs.DIRECTORY).exists()
    # a file someone else put there stays, and so does the directory holding it
    again = _offer(project)
    (project / vs.DIRECTORY / "theirs").write_text("keep me\n")
    again.withdraw()
    assert not Path(again.env[vs.PATH_ENV]).exists()
    assert (project / vs.DIRECTORY / "theirs").read_text() == "keep me\n"


def test_no_offer_through_a_link_and_nothing_written_there(project, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / vs.DIRECTORY).symlink_to(elsewhere, target_is_directory=True)
    assert vs.offer(project, _spec(project), validate_file(str(_spec(project)))) is None
    assert list(elsewhere.iterdir()) == []


def test_an_invalid_spec_is_not_offered(project):
    spec = _spec(project)
    spec.write_text(spec.read_text().replace("tenantFiles:", "bogusKey: 1\ntenantFiles:"))
    result = validate_file(str(spec))
    assert result.spec is None
    assert vs.offer(project, spec, result) is None
    assert not (project / vs.DIRECTORY).exists()


def test_the_program_uses_the_offer_and_validates_no_more(project, monkeypatch):
    """components.platform.load_or_stop, as each stack's program calls it."""
    pytest.importorskip("pulumi")
    import pulumi

    from components import platform as component

    offered = _offer(project)
    fresh = validate_file(str(_spec(project)))
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: warned.append(message))
    for key, value in offered.env.items():
        monkeypatch.setenv(key, value)

    def no_validation(*_a, **_k):
        raise AssertionError("validated again")

    monkeypatch.setattr("gpupool.rules.engine.validate_file", no_validation)
    assert component.load_or_stop(_spec(project)) == fresh.spec
    assert warned == [d.render() for d in fresh.report.sorted() if not d.is_error]


def test_gpupool_stacks_offers_the_model_to_every_pulumi_run_and_withdraws_it(tmp_path, monkeypatch):
    """The command side (gpupool.deploy.stacks): the pulumi commands of the run see the offer in their
    environment, the programs they start would take the model, and nothing is left after the run."""
    pytest.importorskip("pulumi")
    from tests.test_stacks_platform import SPEC, FakeStack, World, _platform
    from tests.test_stacks_platform import project as make_project

    project = make_project.__wrapped__(tmp_path)  # the fixture's body
    world = World({"dev": []})
    p, _ = _platform(project, world, tmp_path)
    p.workspace.env_vars = {"KEPT": "1"}
    seen: list[tuple[str, object]] = []
    for op in ("up", "preview"):
        original = getattr(FakeStack, op)

        def record(self, _op=op, _original=original, **kw):
            env = dict(p.workspace.env_vars)
            seen.append((_op, vs.take(project / SPEC, env)))
            return _original(self, **kw)

        monkeypatch.setattr(FakeStack, op, record)
    p.run("up")
    fresh = validate_file(str(project / SPEC)).spec
    assert [op for op, _ in seen] == ["up", "preview"]  # the up and its convergence check
    assert all(taken is not None and taken[0] == fresh for _, taken in seen)
    assert p.workspace.env_vars == {"KEPT": "1"}
    assert not (project / vs.DIRECTORY).exists()
