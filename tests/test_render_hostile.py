"""`gpupool render` into a directory a pull request could have planted things in (render output is often
committed): it never writes, deletes or follows a link outside its output directory, and deletes or replaces
only files it can prove it wrote. Each case is one of the reproductions of issue 21 (all exited 0 and
wrote or deleted outside the directory)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from gpupool import safe_write
from gpupool.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "stacks/dev/spec.yaml")
VICTIM_TEXT = "# gpupool: component=victim\nkeep: me\n"  # even the old header-only proof cannot be fooled


@pytest.fixture
def victim(tmp_path) -> Path:
    d = tmp_path / "victim"
    d.mkdir()
    for name in ("file", "gpu-operator-values.yaml", "gpu-operator-ns.yaml"):
        (d / name).write_text(VICTIM_TEXT)
    return d


def _intact(victim: Path) -> None:
    assert sorted(os.listdir(victim)) == ["file", "gpu-operator-ns.yaml", "gpu-operator-values.yaml"]
    assert all((victim / n).read_text() == VICTIM_TEXT for n in os.listdir(victim))


def _render(out: Path, *extra: str) -> int:
    return main(["render", SPEC, "--output-dir", str(out), *extra])


def _plant_index(directory: Path, *names: str, name: str = ".gpupool-render") -> None:
    """Add to the index (or plant one) in both spellings: bare names (what gpupool wrote before digests) and `DIGEST  NAME` lines
    carrying the victim's digest (the planter knows its content)."""
    lines = [f"{safe_write.digest(VICTIM_TEXT)}  {n}" for n in names] + list(names)
    index = directory / name
    before = index.read_text() if index.exists() else "# Written by `gpupool render`: planted\n"
    index.write_text(before + "\n".join(lines) + "\n")


def test_a_planted_index_naming_a_file_behind_a_linked_directory(tmp_path, victim, capsys):
    out = tmp_path / "out"
    assert _render(out) == 0
    os.symlink(victim, out / "sub")
    _plant_index(out, "sub/file", "sub/gpu-operator-ns.yaml")
    assert _render(out) == 0
    _intact(victim)
    assert (out / "sub").is_symlink()  # not gpupool's either: left alone


@pytest.mark.parametrize("where", ["sibling", "inside"])
def test_a_planted_leftover_staging_directory(tmp_path, victim, where):
    """A killed render's staging directory is cleaned up, but only what its index proves, never through a
    link. `sibling`: the name older gpupools used beside a brand-new output directory."""
    out = tmp_path / "out"
    if where == "inside":
        out.mkdir()
        leftover = out / ".gpupool-staging-planted"
    else:
        leftover = tmp_path / ".out.gpupool-new-planted"
    leftover.mkdir()
    os.symlink(victim, leftover / "sub")
    os.symlink(victim / "file", leftover / "file")
    _plant_index(leftover, "sub/file", "file", "sub/gpu-operator-ns.yaml")
    os.symlink(victim, out.parent / ".out.gpupool-new-link") if where == "sibling" else None
    assert _render(out) == 0
    _intact(victim)


@pytest.mark.parametrize("name", [".gpupool-render.tmp", ".gpupool-render.pending.tmp", ".gpupool-render.next"])
def test_a_link_planted_at_a_temporary_name(tmp_path, victim, name):
    out = tmp_path / "out"
    assert _render(out) == 0
    (out / "README.md").write_text("the user's own file")  # render then writes in place
    os.symlink(victim / "file", out / name)
    assert _render(out) == 0
    _intact(victim)
    assert (out / "README.md").read_text() == "the user's own file"


def test_a_link_planted_at_the_helm_subdirectory(tmp_path, victim, capsys):
    out = tmp_path / "out"
    assert _render(out) == 0
    os.symlink(victim, out / "helm")
    assert _render(out, "--operator", "values") == 1
    err = capsys.readouterr().err
    assert f"{out}/helm/gpu-operator-values.yaml: is a symbolic link" in err and "nothing was changed" in err
    _intact(victim)


@pytest.mark.parametrize("at", ["gpu-operator-ns.yaml", ".gpupool-render"])
def test_a_link_planted_at_a_file_render_writes(tmp_path, victim, at, capsys):
    out = tmp_path / "out"
    assert _render(out) == 0
    os.unlink(out / at)
    os.symlink(victim / "gpu-operator-ns.yaml", out / at)
    assert _render(out) == 1
    assert f"{out}/{at}: is a symbolic link" in capsys.readouterr().err
    _intact(victim)


@pytest.mark.parametrize("shape", ["DIR", "LINK", "LINK/out"])
def test_the_output_directory_reached_through_a_link(tmp_path, victim, shape, capsys):
    os.symlink(victim, tmp_path / "LINK")
    os.symlink(victim, tmp_path / "DIR")  # a link where the output directory itself should be
    assert _render(tmp_path / shape) == 1
    assert "is a symbolic link" in capsys.readouterr().err
    _intact(victim)


def test_a_planted_index_cannot_delete_the_users_files(tmp_path):
    out = tmp_path / "out"
    assert _render(out) == 0
    (out / "README.md").write_text("mine")
    (out / "sub").mkdir()
    (out / "sub" / "notes.txt").write_text("mine too")
    with open(out / ".gpupool-render", "a") as f:
        f.write("README.md\nsub/notes.txt\n" + f"{safe_write.digest('not the content')}  README.md\n")
    assert _render(out) == 0
    assert (out / "README.md").read_text() == "mine" and (out / "sub/notes.txt").read_text() == "mine too"


def test_a_rendered_file_edited_by_hand_is_not_overwritten(tmp_path, capsys):
    """The digest in the index is the proof: a hand edit is refused, not silently lost."""
    out = tmp_path / "out"
    assert _render(out) == 0
    (out / "gpu-operator-ns.yaml").write_text((out / "gpu-operator-ns.yaml").read_text() + "# my note\n")
    assert _render(out) == 1
    assert "gpu-operator-ns.yaml: has changed since gpupool wrote it" in capsys.readouterr().err
    assert (out / "gpu-operator-ns.yaml").read_text().endswith("# my note\n")


def test_an_index_written_before_digests_is_still_read(tmp_path):
    out = tmp_path / "out"
    assert _render(out) == 0
    index = out / ".gpupool-render"
    lines = index.read_text().splitlines()
    index.write_text("\n".join(ln if ln.startswith("#") else ln.split("  ", 1)[1] for ln in lines) + "\n")
    (out / "old-object.yaml").write_text("# gpupool: component=old\n")
    with open(index, "a") as f:
        f.write("old-object.yaml\n")
    assert _render(out) == 0
    assert not (out / "old-object.yaml").exists()
    assert all("  " in ln for ln in index.read_text().splitlines() if not ln.startswith("#"))


_FS_CALLS = ("open", "stat", "mkdir", "rename", "link", "unlink", "rmdir", "listdir", "scandir", "replace")


def test_a_link_swapped_in_between_check_and_use(tmp_path, victim, monkeypatch, capsys):
    """Before every file-system call that names the `helm` subdirectory, a racing process replaces it by a
    link to a directory holding a file of the same name and content (so a digest check alone would pass).
    Whatever render then does, nothing outside its directory changes and it exits 0 or 1 (never a crash)."""
    out = tmp_path / "out"
    assert _render(out, "--operator", "values") == 0
    (victim / "gpu-operator-values.yaml").write_bytes((out / "helm/gpu-operator-values.yaml").read_bytes())
    victim_before = {n: (victim / n).read_bytes() for n in os.listdir(victim)}
    swaps: list[int] = []
    lock = threading.Lock()

    def wrap(real):
        def call(*args, **kwargs):
            if any(a == "helm" or (isinstance(a, str) and a.startswith("helm/")) for a in args):
                with lock:
                    target = out / "helm"
                    if target.is_dir() and not target.is_symlink():
                        os.rename(target, tmp_path / f"aside-{len(swaps)}")
                        os.symlink(victim, target)
                        swaps.append(1)
            return real(*args, **kwargs)

        return call

    for fn in _FS_CALLS:
        monkeypatch.setattr(os, fn, wrap(getattr(os, fn)))
    spec = tmp_path / "spec.yaml"
    code = main(["render", SPEC, "--output-dir", str(out), "--operator", "values"])
    monkeypatch.undo()
    assert swaps, "the race never happened"
    assert code in (0, 1), capsys.readouterr().err
    assert {n: (victim / n).read_bytes() for n in os.listdir(victim)} == victim_before
    assert not spec.exists()
