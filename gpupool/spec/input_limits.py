"""What one run may read: bytes per file, bytes in all and values in all (the caps that keep a hostile or runaway
spec from exhausting memory or time), set by the CLI's flags or the environment, and the bounded readers that
enforce them. gpupool.spec.loader charges every file it reads to one Budget per run."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# Aliases can make a small file expand into a huge tree ("billion laughs"); no real spec comes near this. The
# budget is shared by every file of a run: 80 small alias bombs in one pull request cost what one does.
MAX_VALUES = 2_000_000
# Input caps, raised with --max-file-size / --max-input-size. A spec of 1,000 tenants and 100 pools is about
# 350 KB (bench/bench_validate.py). The run cap is what the slowest command handles within 60 s on 2 loaded
# cores: render took 39 s for 512 KiB of tenant files and 124 s for 1 MiB (load 13-17, bench/
# bench_input_limits.py; docs/reference/cli.md has the table). Loading costs ~60-300 bytes of memory per input byte.
MAX_FILE_BYTES = 512 << 10
MAX_RUN_BYTES = 512 << 10


def size_text(n: int) -> str:
    """A byte count as the size flags spell it: 512Ki, 4Mi."""
    for unit, shift in (("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n:,} bytes"


@dataclass
class Limits:
    """What one run (one load_spec) may read: bytes per file, bytes in all, values in all."""

    file_bytes: int = MAX_FILE_BYTES
    run_bytes: int = MAX_RUN_BYTES
    values: int = MAX_VALUES


_SIZE_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
SIZE_ENV = {"file_bytes": "GPUPOOL_MAX_FILE_SIZE", "run_bytes": "GPUPOOL_MAX_INPUT_SIZE"}


def parse_size(text: str) -> int:
    """A byte count: 512Ki, 64Mi, 500M, 2Gi or plain bytes; ValueError for anything else."""
    number = text.strip().rstrip("kKMGi")
    unit = text.strip()[len(number) :]
    if not number.isdigit() or not number.isascii() or unit not in _SIZE_UNITS or len(number) > 15:
        raise ValueError("give a size in bytes, such as 512Ki, 64Mi, 500M or 2Gi")
    return int(number) * _SIZE_UNITS[unit]


def limits_from_env(environ: Mapping[str, str] | None = None) -> Limits:
    """The default caps, raised (or lowered) by $GPUPOOL_MAX_FILE_SIZE / $GPUPOOL_MAX_INPUT_SIZE: the Pulumi
    program has no command line, so a platform larger than the defaults sets them in its environment. A
    malformed value is ignored (the default holds) rather than lifting the cap."""
    environ = os.environ if environ is None else environ
    sizes = {}
    for field_name, var in SIZE_ENV.items():
        try:
            sizes[field_name] = parse_size(environ[var])
        except (KeyError, ValueError):
            continue
    return Limits(**sizes)


LIMITS = limits_from_env()  # the process's limits; the CLI sets them from its flags (their defaults: these)


@dataclass
class Budget:
    """What is left of a run's limits."""

    limits: Limits
    bytes_left: int = 0
    values_left: int = 0

    @classmethod
    def start(cls, limits: Limits | None = None) -> Budget:
        limits = limits or LIMITS
        return cls(limits, limits.run_bytes, limits.values)


class TooLarge(Exception):
    pass


class Refused(Exception):
    """A file that is not read at all (a device, too large): the message says why."""


def read_regular(path: Path, budget: Budget) -> bytes:
    """The bytes of PATH, read only when it is a regular file within the limits (never a FIFO or a device:
    /dev/zero would be read until memory runs out). O_NONBLOCK: opening a FIFO must not hang."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(st.st_mode):
            raise Refused("is not a regular file (a FIFO, a device or a socket); give a YAML file")
        return read_capped(fd, st.st_size, budget)
    finally:
        os.close(fd)


def read_capped(fd: int, size: int, budget: Budget) -> bytes:
    limit = min(budget.limits.file_bytes, budget.bytes_left)
    if size > limit:
        raise Refused(too_big(budget))
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):  # a file may grow while it is read
        total += len(chunk)
        if total > limit:
            raise Refused(too_big(budget))
        chunks.append(chunk)
    budget.bytes_left -= total
    return b"".join(chunks)


def too_big(budget: Budget) -> str:
    file_cap, run_cap = budget.limits.file_bytes, budget.limits.run_bytes
    if budget.bytes_left < file_cap:
        return (
            f"not read: the files of this run would exceed {run_cap:,} bytes in all (raise the cap with "
            "--max-input-size if the spec really is this large)"
        )
    return f"not read: larger than {file_cap:,} bytes (raise the cap with --max-file-size if it really is this large)"


def read_stdin(stream, budget: Budget | None = None) -> bytes:
    """Standard input, within the limits; a device (< /dev/zero) is refused, a pipe or a file is read."""
    budget = budget or Budget.start()
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (tests): bounded reading
        data = stream.read(min(budget.limits.file_bytes, budget.bytes_left) + 1)
        if len(data) > min(budget.limits.file_bytes, budget.bytes_left):
            raise Refused(too_big(budget)) from None
        budget.bytes_left -= len(data)
        return data
    st = os.fstat(fd)
    if (stat.S_ISCHR(st.st_mode) and not os.isatty(fd)) or stat.S_ISBLK(st.st_mode):
        raise Refused("standard input is a device, not a spec; pipe or redirect a YAML file into it")
    return read_capped(fd, st.st_size if stat.S_ISREG(st.st_mode) else 0, budget)
