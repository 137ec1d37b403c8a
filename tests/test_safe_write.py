"""gpupool.safe_write, the one layer every command writes through: no link followed at any component (also when
one appears between a check and the use), new names created exclusively, nothing deleted or replaced that it
cannot prove gpupool wrote."""

from __future__ import annotations

import os
import threading

import pytest

from gpupool import safe_write
from gpupool.safe_write import Directory, Refused, digest


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """tmp_path/root (the target) and tmp_path/victim (outside it, holding victim/file = "keep")."""
    (tmp_path / "root").mkdir()
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "file").write_text("keep")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _victim_intact(tree) -> None:
    assert sorted(os.listdir(tree / "victim")) == ["file"]
    assert (tree / "victim" / "file").read_text() == "keep"


# -- reaching the target directory ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["link", "link/sub", "root/link", "root/link/sub", "/ABS/link/sub"])
def test_no_component_of_the_target_path_may_be_a_link(tree, path):
    os.symlink(tree / "victim", tree / "link")
    os.symlink(tree / "victim", tree / "root" / "link")
    path = path.replace("/ABS", str(tree))
    with pytest.raises(Refused, match="symbolic link"):
        Directory.open(path, create=True)
    _victim_intact(tree)


def test_an_absolute_path_outside_the_current_directory_is_walked_from_the_root(tree, monkeypatch):
    monkeypatch.chdir(tree / "victim")
    with Directory.open(tree / "root" / "new", create=True) as d:
        d.create("a.yaml", "x")
    assert (tree / "root" / "new" / "a.yaml").read_text() == "x"
    os.symlink(tree / "victim", tree / "root" / "link")
    with pytest.raises(Refused, match="symbolic link"):
        Directory.open(tree / "root" / "link" / "x", create=True)
    _victim_intact(tree)


def test_a_file_on_the_way_is_not_a_directory(tree):
    (tree / "root" / "f").write_text("")
    with pytest.raises(Refused, match="not a directory"):
        Directory.open("root/f/x", create=True)


# -- names beneath it ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../victim/file", "a/../../victim/file", "/etc/passwd", "", "a//b", "./a", "a\0b"])
def test_names_that_could_leave_the_directory_are_refused(tree, name):
    with Directory.open("root") as d:
        with pytest.raises(Refused, match="not a plain name"):
            d.create(name, "x")
        with pytest.raises(Refused, match="not a plain name"):
            d.write_new(name, "x")
        assert d.remove_proven(name, {digest("keep")}) is False
    _victim_intact(tree)


@pytest.mark.parametrize("at", ["link", "sub/link", "link/file", "sub/link/file"])
def test_a_link_at_any_component_is_refused_for_writing(tree, at):
    """The link is met, never followed: the last component (O_NOFOLLOW) as well as the ones above it."""
    (tree / "root" / "sub").mkdir()
    os.symlink(tree / "victim", tree / "root" / "link")
    os.symlink(tree / "victim", tree / "root" / "sub" / "link")
    os.symlink(tree / "victim" / "file", tree / "root" / "sub" / "filelink")
    with Directory.open("root") as d:
        for name in (at, "sub/filelink"):
            with pytest.raises(Refused):
                d.create(name, "pwned")
            with pytest.raises(Refused):
                d.write_new(name, "pwned")
            with pytest.raises(Refused, match="symbolic link"):
                d.read(name, 100)
            assert d.remove_proven(name, {digest("keep")}) is False
            assert d.kind(name) == "link"
    _victim_intact(tree)
    assert os.path.islink(tree / "root" / "sub" / "filelink")


def test_create_never_overwrites_and_leaves_no_temporary_file(tree):
    with Directory.open("root") as d:
        d.create("sub/a.yaml", "one", make_parents=True)
        with pytest.raises(Refused, match="exists already"):
            d.create("sub/a.yaml", "two")
    assert (tree / "root/sub/a.yaml").read_text() == "one"
    assert os.listdir(tree / "root/sub") == ["a.yaml"]


def test_remove_needs_the_proof(tree):
    (tree / "root" / "mine").write_text("written by gpupool")
    (tree / "root" / "yours").write_text("edited by hand")
    with Directory.open("root") as d:
        assert d.remove_proven("yours", {digest("written by gpupool")}) is False
        assert d.remove_proven("mine", set()) is False
        assert d.remove_proven("mine", {digest("written by gpupool")}) is True
    assert sorted(os.listdir(tree / "root")) == ["yours"]


def test_rename_replaces_only_a_proven_file(tree):
    with Directory.open("root") as d:
        d.write_new("staged", "new")
        (tree / "root" / "target").write_text("old")
        with pytest.raises(Refused, match="not written by gpupool"):
            d.rename("staged", d, "target", proof={digest("other")})
        assert (tree / "root" / "target").read_text() == "old"
        os.unlink(tree / "root" / "target")
        os.symlink(tree / "victim" / "file", tree / "root" / "target")
        with pytest.raises(Refused, match="symbolic link"):
            d.rename("staged", d, "target", proof={digest("keep")})  # the link's target would prove it
        os.unlink(tree / "root" / "target")
        (tree / "root" / "target").write_text("old")
        d.rename("staged", d, "target", proof={digest("old")})
    assert (tree / "root" / "target").read_text() == "new"
    _victim_intact(tree)


def test_a_fifo_or_a_device_is_refused_without_blocking(tree):
    os.mkfifo(tree / "root" / "fifo")
    os.symlink("/dev/zero", tree / "root" / "zero")
    with Directory.open("root") as d:
        with pytest.raises(Refused, match="not a regular file"):
            d.read("fifo", 100)  # opened with O_NONBLOCK: no writer, yet no hang
        with pytest.raises(Refused, match="symbolic link"):
            d.read("zero", 100)
        assert d.proven("fifo", {digest("")}) is False
        assert d.remove_proven("fifo", {digest("")}) is False
    assert (tree / "root" / "fifo").exists()


def test_read_stops_at_the_limit(tree):
    (tree / "root" / "big").write_bytes(b"x" * 5000)
    with Directory.open("root") as d:
        assert d.read("big", 5000) == b"x" * 5000
        with pytest.raises(Refused, match="larger than 4,999 bytes"):
            d.read("big", 4999)


# -- a link that appears between a check and the use ---------------------------------------------------


_FS_CALLS = ("open", "stat", "mkdir", "rename", "link", "unlink", "rmdir")


def _swap_before_each_call(monkeypatch, tree, name: str) -> list[int]:
    """Before every file-system call that names NAME, replace root/NAME (a directory) by a link to the victim
    directory: the worst moment for any check-then-use. Returns the list of calls made."""
    calls: list[int] = []
    lock = threading.Lock()

    def wrap(real):
        def call(*args, **kwargs):
            if any(a == name for a in args):
                with lock:
                    calls.append(1)
                    target = tree / "root" / name
                    if target.is_dir() and not target.is_symlink():
                        os.rename(target, tree / f"aside-{len(calls)}")
                        os.symlink(tree / "victim", target)
            return real(*args, **kwargs)

        return call

    for fn in _FS_CALLS:
        monkeypatch.setattr(safe_write.os, fn, wrap(getattr(os, fn)))
    return calls


def test_a_link_swapped_in_before_the_use_is_never_followed(tree, monkeypatch):
    (tree / "root" / "sub").mkdir()
    (tree / "root" / "sub" / "file").write_text("keep")  # the same content as the victim: the proof holds
    with Directory.open("root") as d:
        calls = _swap_before_each_call(monkeypatch, tree, "sub")
        for attempt in (
            lambda: d.create("sub/new", "pwned"),
            lambda: d.write_new("sub/new", "pwned"),
            lambda: d.remove_proven("sub/file", {digest("keep")}),
            lambda: d.read("sub/file", 100),
        ):
            try:
                result = attempt()
            except Refused as exc:
                assert "symbolic link" in exc.reason
            else:
                assert not result
        monkeypatch.undo()
    assert calls, "the swap never ran"
    _victim_intact(tree)


# -- output files the user names (diff --full-output, stacks --preview-out) ----------------------------


def test_an_output_file_replaces_only_a_regular_file(tree):
    safe_write.write_output("root/out.md", "one")
    safe_write.write_output("root/out.md", "two")  # a rerun replaces its own (or any regular) file
    assert (tree / "root/out.md").read_text() == "two"
    os.link(tree / "root/out.md", tree / "victim" / "hard")  # a hard link keeps its content: a rename, no write
    safe_write.write_output(str(tree / "root/out.md"), "three")
    assert (tree / "victim" / "hard").read_text() == "two"
    os.unlink(tree / "victim" / "hard")
    assert sorted(os.listdir(tree / "root")) == ["out.md"]  # no temporary file left
    _victim_intact(tree)


@pytest.mark.parametrize("path", ["root/link.md", "root/dirlink/out.md", "dirlink/out.md", "root/fifo", "root/sub"])
def test_an_output_file_is_never_written_through_a_link_or_into_a_special_file(tree, path):
    os.symlink(tree / "victim" / "file", tree / "root" / "link.md")
    os.symlink(tree / "victim", tree / "root" / "dirlink")
    os.symlink(tree / "victim", tree / "dirlink")
    os.mkfifo(tree / "root" / "fifo")
    (tree / "root" / "sub").mkdir()
    with pytest.raises(Refused) as refused:
        safe_write.write_output(path, "pwned")
    where = refused.value.path  # located: the name itself, or the link on the way to it
    assert where == path or (path.startswith(where + "/") and "symbolic link" in refused.value.reason)
    assert refused.value.reason != "" and "pwned" not in str(refused.value)
    _victim_intact(tree)
    assert not any(p.name.startswith(".") for p in (tree / "root").iterdir())


@pytest.mark.parametrize("path", ["", "root/", "root/..", "."])
def test_an_output_path_that_names_no_file_is_refused(tree, path):
    with pytest.raises(Refused, match="not a file name"):
        safe_write.write_output(path, "x")


def test_an_output_file_swapped_for_a_link_before_the_rename_stays_a_name(tree, monkeypatch):
    """The worst moment: the name becomes a link after the kind check. The rename replaces the link itself."""
    (tree / "root" / "out.md").write_text("old")
    real_rename = os.rename

    def swap_then_rename(src, dst, **kw):
        os.unlink(tree / "root" / "out.md")
        os.symlink(tree / "victim" / "file", tree / "root" / "out.md")
        return real_rename(src, dst, **kw)

    monkeypatch.setattr(safe_write.os, "rename", swap_then_rename)
    safe_write.write_output("root/out.md", "new")
    monkeypatch.undo()
    assert not (tree / "root" / "out.md").is_symlink() and (tree / "root" / "out.md").read_text() == "new"
    _victim_intact(tree)


def test_links_and_sparse_files_are_created_beneath_the_directory_only(tree):
    with Directory.open("root") as d:
        d.symlink_new("t", str(tree / "victim"))
        with pytest.raises(Refused, match="symbolic link"):
            d.write_new("t/x.yaml", "pwned")  # a tree naming both a link `t` and a file `t/x.yaml`
        with pytest.raises(Refused, match="symbolic link"):
            d.sparse_new("t/big.yaml", 1 << 30)
        with pytest.raises(Refused, match="exists already"):
            d.symlink_new("t", "elsewhere")
        d.sparse_new("sub/big.yaml", 1 << 30)
    assert os.stat(tree / "root/sub/big.yaml").st_size == 1 << 30
    assert os.stat(tree / "root/sub/big.yaml").st_blocks * 512 < 1 << 20  # a hole, not a gigabyte
    _victim_intact(tree)
