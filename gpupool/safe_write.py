"""The one way gpupool writes files: beneath one directory, following no symbolic link, never clobbering.

Every command that writes (render, `tenant new`, `init`, `diff --full-output`, `stacks --preview-out`, the
`diff --base` checkout of BASE) opens its target directory once as a `Directory`
and does everything else relative to that descriptor, one path component at a time, each opened with
O_NOFOLLOW (O_DIRECTORY for the components above a file). So:

- no name is ever resolved through a symlink, at any component: a planted link is refused where it is met
  (ELOOP), also when it appears between a check and the use, since there is no separate check;
- names beneath the directory are plain relative names (no `..`, no absolute path, no empty component), so
  nothing below it can climb out;
- new files and directories are created exclusively (O_CREAT|O_EXCL, mkdir), under random names where
  they are temporary, and reach their final name by a rename inside the directory;
- a file is deleted or replaced only when the caller proves that gpupool wrote it: its content hashes to a
  digest gpupool recorded when it wrote it (`remove_proven`, `rename(..., proof=...)`). A planted record can
  therefore at worst make gpupool delete a file inside the directory whose exact content the planter already
  knew, which the same pull request could have deleted itself. The one exception: an output file the user
  names on the command line (`write_output`) replaces a regular file of that name, by a rename.

The directory itself is reached the same way: a relative path from the current directory, an absolute one
from `/` (an absolute path below the current directory from there), with no link followed at any component.
A refusal is a `Refused` error naming the path; commands report it as exit 1.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterable, Iterator

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted at a name must not hang the command (it is then refused by fstat).
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


class Refused(Exception):
    """A path gpupool will not write, read or delete through (a link, not a directory, not gpupool's), or
    a write that failed. `str()` is `PATH: reason`."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def digest(data: bytes | str) -> str:
    """The proof of a file gpupool writes: the SHA-256 of its bytes, as hex."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


_REASONS: dict[int | None, str] = {
    errno.ELOOP: "is a symbolic link; gpupool follows no link where it writes (remove the link)",
    errno.ENOTDIR: "is not a directory",
    errno.ENAMETOOLONG: "the name is too long for the file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EEXIST: "exists already; gpupool does not overwrite it",
    errno.ENOENT: "does not exist",
}


def reason(exc: OSError) -> str:
    return _REASONS.get(exc.errno, exc.strerror or str(exc))  # errno is None for an OSError raised by hand


def _parts(name: str) -> list[str]:
    """The components of a name beneath a directory; ValueError for one that could leave it."""
    if not name or "\0" in name or name.startswith("/"):
        raise ValueError(name)
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(name)
    return parts


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


class Directory:
    """An open directory; every operation is relative to its descriptor and follows no link."""

    def __init__(self, fd: int, shown: str):
        self.fd = fd
        self.shown = shown  # the path as the user gave it, for messages

    # -- opening ----------------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike, *, create: bool = False) -> Directory:
        """Open PATH (creating missing components with CREATE) with no link followed at any component."""
        shown = os.fspath(path)
        if not shown or "\0" in shown:
            raise Refused(shown or "''", "is not a usable directory path")
        rel, start = shown, "."
        if os.path.isabs(shown):
            # Below the current directory: walk from there (the current directory is the user's choice however
            # it was reached); anywhere else: from the root. Normalising is safe here: the walk then meets no
            # link, so `a/..` means what it says.
            norm, cwd = os.path.normpath(shown), os.getcwd()
            if norm == cwd or norm.startswith(os.path.join(cwd, "")):
                rel = norm[len(cwd) :]
            else:
                rel, start = norm, "/"
        fd = os.open(start, _DIR_FLAGS & ~os.O_NOFOLLOW)
        walked = "" if start == "." else "/"
        try:
            for part in [p for p in rel.split("/") if p not in ("", ".")]:
                walked = os.path.join(walked, part) if walked else part
                nxt = _step(fd, part, walked, create, allow_up=True)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, shown)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Directory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def where(self, name: str = "") -> str:
        return os.path.join(self.shown, name) if name else self.shown

    def _checked(self, name: str) -> list[str]:
        try:
            return _parts(name)
        except ValueError:
            raise Refused(self.where(name), "is not a plain name beneath the directory") from None

    def subdir(self, name: str, *, create: bool = False) -> Directory:
        """The directory NAME beneath this one (its own descriptor; close it)."""
        fd = os.dup(self.fd)
        walked = ""
        try:
            for part in self._checked(name):
                walked = os.path.join(walked, part) if walked else part
                nxt = _step(fd, part, self.where(walked), create, allow_up=False)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return Directory(fd, self.where(name))

    def parent_of(self, name: str, *, create: bool = False) -> tuple[Directory, str]:
        """(the directory holding NAME, NAME's last component)."""
        parts = self._checked(name)
        if len(parts) == 1:
            return Directory(os.dup(self.fd), self.shown), parts[0]
        return self.subdir("/".join(parts[:-1]), create=create), parts[-1]

    # -- looking -----------------------------------------------------------------------------------------

    def kind(self, name: str) -> str:
        """'missing', 'file', 'dir', 'link' or 'other' (a FIFO, a device, a socket), never following a link.
        A missing or linked directory on the way is 'missing' or 'link'."""
        try:
            parent, last = self.parent_of(name)
        except Refused as exc:
            return "link" if "symbolic link" in exc.reason else "missing"
        with parent:
            try:
                st = os.stat(last, dir_fd=parent.fd, follow_symlinks=False)
            except FileNotFoundError:
                return "missing"
            except OSError:
                return "missing"
        if stat.S_ISLNK(st.st_mode):
            return "link"
        if stat.S_ISREG(st.st_mode):
            return "file"
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        return "other"

    def entries(self, name: str = "") -> list[str]:
        """The names directly in NAME (this directory by default), sorted."""
        if not name:
            return sorted(os.listdir(self.fd))
        with self.subdir(name) as d:
            return sorted(os.listdir(d.fd))

    def read(self, name: str, limit: int) -> bytes | None:
        """The bytes of the regular file NAME (None when missing); Refused when it is a link, not a regular
        file, or larger than LIMIT bytes (read no further than that)."""
        try:
            parent, last = self.parent_of(name)
        except Refused as exc:
            if exc.reason == _REASONS[errno.ENOENT]:
                return None
            raise
        with parent:
            try:
                fd = os.open(last, _READ_FLAGS, dir_fd=parent.fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise Refused(self.where(name), reason(exc)) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise Refused(self.where(name), "is not a regular file (a FIFO, a device or a socket)")
            return _read_at_most(fd, limit, self.where(name))
        finally:
            os.close(fd)

    def proven(self, name: str, digests: Iterable[str]) -> bool:
        """True when NAME is a regular file (reached with no link) whose content hashes to one of DIGESTS
        (hashed as it is read: a proof costs no memory)."""
        wanted = set(digests)
        if not wanted:
            return False
        try:
            parent, last = self.parent_of(name)
        except Refused:
            return False
        with parent:
            try:
                fd = os.open(last, _READ_FLAGS, dir_fd=parent.fd)
            except OSError:
                return False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            h = hashlib.sha256()
            while chunk := os.read(fd, _CHUNK):
                h.update(chunk)
            return h.hexdigest() in wanted
        finally:
            os.close(fd)

    # -- writing -----------------------------------------------------------------------------------------

    def create(self, name: str, data: bytes | str, *, make_parents: bool = False) -> None:
        """Create NAME holding DATA; Refused when anything is at NAME already (never overwritten). The bytes
        go to an exclusively created temporary name first and are then linked to NAME, which fails if NAME
        exists: a killed command leaves no half-written NAME (at most a hidden temporary file)."""
        blob = data.encode("utf-8") if isinstance(data, str) else data
        parent, last = self.parent_of(name, create=make_parents)
        with parent:
            tmp = parent._write_temp(last, blob)
            try:
                os.link(tmp, last, src_dir_fd=parent.fd, dst_dir_fd=parent.fd, follow_symlinks=False)
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
                    raise Refused(self.where(name), reason(exc)) from None
                # A file system without hard links: create NAME itself exclusively.
                os.unlink(tmp, dir_fd=parent.fd)
                tmp = ""
                parent._write_exclusive(last, blob, self.where(name))
            finally:
                if tmp:
                    os.unlink(tmp, dir_fd=parent.fd)

    def write_new(self, name: str, data: bytes | str) -> None:
        """Create NAME exclusively (O_EXCL|O_NOFOLLOW) and write DATA into it (no temporary name: for files
        inside a staging directory that is itself temporary)."""
        blob = data.encode("utf-8") if isinstance(data, str) else data
        parent, last = self.parent_of(name, create=True)
        with parent:
            parent._write_exclusive(last, blob, self.where(name))

    def replace_output(self, name: str, data: bytes | str) -> None:
        """Write NAME as DATA where NAME is an output file the user named on the command line (`diff
        --full-output FILE`, `stacks --preview-out FILE`): the one case where a file gpupool cannot prove it
        wrote is replaced, because the user asked for that very name. Only a regular file is replaced (a link,
        a directory, a FIFO or a device is refused), and by a rename of an exclusively created temporary file:
        a rename replaces the name itself, never what a link (swapped in meanwhile) or a hard link reaches, and
        a killed command leaves the old content or the new, never half of it."""
        blob = data.encode("utf-8") if isinstance(data, str) else data
        parent, last = self.parent_of(name)
        with parent:
            kind = parent.kind(last)
            if kind not in ("missing", "file"):
                raise Refused(self.where(name), refusal(kind))
            tmp = parent._write_temp(last, blob)
            try:
                os.rename(tmp, last, src_dir_fd=parent.fd, dst_dir_fd=parent.fd)
            except OSError as exc:
                os.unlink(tmp, dir_fd=parent.fd)
                raise Refused(self.where(name), reason(exc)) from None

    def symlink_new(self, name: str, target: str) -> None:
        """Create the symbolic link NAME -> TARGET (symlinkat: NAME itself is created, nothing is followed);
        Refused when anything is at NAME already."""
        parent, last = self.parent_of(name, create=True)
        with parent:
            try:
                os.symlink(target, last, dir_fd=parent.fd)
            except OSError as exc:
                raise Refused(self.where(name), reason(exc)) from None

    def sparse_new(self, name: str, size: int) -> None:
        """Create NAME exclusively as a file of SIZE bytes that holds nothing (a hole: no disk, no memory)."""
        parent, last = self.parent_of(name, create=True)
        with parent:
            try:
                fd = os.open(last, _CREATE_FLAGS, 0o666, dir_fd=parent.fd)
            except OSError as exc:
                raise Refused(self.where(name), reason(exc)) from None
            try:
                os.ftruncate(fd, size)
            except OSError as exc:
                raise Refused(self.where(name), reason(exc)) from None
            finally:
                os.close(fd)

    def _write_exclusive(self, last: str, blob: bytes, shown: str) -> None:
        try:
            fd = os.open(last, _CREATE_FLAGS, 0o666, dir_fd=self.fd)
        except OSError as exc:
            raise Refused(shown, reason(exc)) from None
        try:
            with os.fdopen(fd, "wb", closefd=False) as f:
                f.write(blob)
        except OSError as exc:
            raise Refused(shown, reason(exc)) from None
        finally:
            os.close(fd)

    def _write_temp(self, last: str, blob: bytes) -> str:
        """Write BLOB to a new hidden name beside LAST (created exclusively); returns the name."""
        prefix = f".{last[:100]}.gpupool-tmp-"
        for _ in range(100):
            tmp = prefix + secrets.token_hex(6)
            try:
                self._write_exclusive(tmp, blob, self.where(tmp))
                return tmp
            except Refused as exc:
                if exc.reason != _REASONS[errno.EEXIST]:
                    raise Refused(self.where(last), exc.reason) from None
        raise Refused(self.where(last), "cannot find a free temporary name")

    def make_temp_dir(self, prefix: str) -> str:
        """Create a new directory PREFIX + random here (mkdir is exclusive); returns its name."""
        for _ in range(100):
            name = prefix + secrets.token_hex(6)
            try:
                os.mkdir(name, 0o777, dir_fd=self.fd)
                return name
            except FileExistsError:
                continue
            except OSError as exc:
                raise Refused(self.where(name), reason(exc)) from None
        raise Refused(self.where(prefix), "cannot find a free temporary name")

    def rename(self, src: str, dst_dir: Directory, dst: str, *, proof: Iterable[str] = ()) -> None:
        """Move SRC (here) to DST (in DST_DIR), both plain names. Whatever is at DST must be a regular file
        that PROOF proves gpupool wrote, else Refused and nothing moves. The rename itself replaces the name
        DST and never follows a link there."""
        for n in (src, dst):
            if "/" in n:
                raise ValueError(n)
        kind = dst_dir.kind(dst)
        if kind != "missing" and not (kind == "file" and dst_dir.proven(dst, proof)):
            raise Refused(dst_dir.where(dst), refusal(kind))
        try:
            os.rename(src, dst, src_dir_fd=self.fd, dst_dir_fd=dst_dir.fd)
        except OSError as exc:
            raise Refused(dst_dir.where(dst), reason(exc)) from None

    def remove_proven(self, name: str, digests: Iterable[str]) -> bool:
        """Delete the regular file NAME if its content hashes to one of DIGESTS; True when deleted. Anything
        else (a link, a directory, a file gpupool cannot prove it wrote) is left alone."""
        try:
            parent, last = self.parent_of(name)
        except Refused:
            return False
        with parent:
            if not parent.proven(last, digests):
                return False
            try:
                os.unlink(last, dir_fd=parent.fd)  # unlink removes the name itself, never what a link names
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise Refused(self.where(name), reason(exc)) from None
        return True

    def remove_empty_dir(self, name: str) -> bool:
        """Remove the directory NAME if it is empty (rmdir never follows a link: a link is ENOTDIR)."""
        try:
            self._checked(name)
            parent, last = self.parent_of(name)
        except Refused:
            return False
        with parent:
            if _is_link(parent.fd, last):
                return False
            try:
                os.rmdir(last, dir_fd=parent.fd)
            except OSError:
                return False
        return True

    def walk(self, name: str = "") -> Iterator[tuple[str, str]]:
        """(relative name, kind) of every entry beneath NAME, kind as `kind` says; only directories reached
        with no link are entered (a link is yielded as 'link', never followed)."""
        for entry in self.entries(name):
            rel = f"{name}/{entry}" if name else entry
            kind = self.kind(rel)
            yield rel, kind
            if kind == "dir":
                yield from self.walk(rel)

    def walk_files(self, name: str = "") -> Iterator[str]:
        """Every regular file beneath NAME (relative names), never entering a link."""
        for entry in self.entries(name):
            rel = f"{name}/{entry}" if name else entry
            kind = self.kind(rel)
            if kind == "file":
                yield rel
            elif kind == "dir":
                yield from self.walk_files(rel)


def write_output(path: str | os.PathLike, data: bytes | str) -> None:
    """Write the output file PATH that the user named (Directory.replace_output), its directory reached with
    no link followed at any component. Refused when PATH names no file (empty, a directory, `..`)."""
    with _named_file(path) as (d, last):
        d.replace_output(last, data)


def read_input(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of the regular file PATH that the user named (`diff --preview-file FILE`), reached with no
    link followed at any component (Directory.read): a link planted at that name in a pull request's checkout
    must not publish what it points at (a kubeconfig, /proc/self/environ) in the comment. Refused when
    missing, a link, not a regular file or larger than LIMIT."""
    with _named_file(path) as (d, last):
        data = d.read(last, limit)
    if data is None:
        raise Refused(os.fspath(path), _REASONS[errno.ENOENT])
    return data


@contextlib.contextmanager
def _named_file(path: str | os.PathLike) -> Iterator[tuple[Directory, str]]:
    """The directory of the file PATH that the user named, opened with no link followed at any component,
    and the file's name in it; a refusal inside names the whole PATH. Refused when PATH names no file."""
    shown = os.fspath(path)
    head, _, last = shown.rpartition("/")
    if not last or last in (".", ".."):
        raise Refused(shown or "''", "is not a file name")
    with Directory.open(head or ("/" if shown.startswith("/") else ".")) as d:
        try:
            yield d, last
        except Refused as exc:
            raise Refused(shown, exc.reason) from None


def refusal(kind: str) -> str:
    """Why a name of this kind ('link', 'dir', 'other', 'file') is not replaced."""
    if kind == "link":
        return _REASONS[errno.ELOOP]
    if kind == "dir":
        return "exists and is a directory; gpupool does not replace it"
    if kind == "other":
        return "exists and is not a regular file; gpupool does not replace it"
    return "exists and was not written by gpupool (or has changed since); not overwriting it"


def _step(fd: int, part: str, shown: str, create: bool, *, allow_up: bool) -> int:
    """Open directory PART under FD with no link followed (creating it with CREATE); FD stays open."""
    if part == ".." and not allow_up:
        raise Refused(shown, "is not a plain name beneath the directory")
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise Refused(shown, _REASONS[errno.ENOENT]) from None
    except OSError as exc:
        raise Refused(shown, _dir_reason(fd, part, exc)) from None
    try:
        os.mkdir(part, 0o777, dir_fd=fd)
    except FileExistsError:
        pass  # made by someone else meanwhile: opened below with the same no-follow checks
    except OSError as exc:
        raise Refused(shown, reason(exc)) from None
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        raise Refused(shown, _dir_reason(fd, part, exc)) from None


def _dir_reason(fd: int, part: str, exc: OSError) -> str:
    # O_DIRECTORY|O_NOFOLLOW on a link is ELOOP, or ENOTDIR on some kernels: name the link either way.
    return _REASONS[errno.ELOOP] if exc.errno == errno.ENOTDIR and _is_link(fd, part) else reason(exc)


def _read_at_most(fd: int, limit: int, shown: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise Refused(shown, f"is larger than {limit:,} bytes")
        chunks.append(chunk)
