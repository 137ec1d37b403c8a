"""The spec validated once per `gpupool stacks` command, not once per program run (issue 40 item 3).

Each stack's program is a process pulumi starts: three per stack in an up (the refresh, the up, the convergence
check), and each loaded and judged the whole spec, 0.40 s at 1,000 tenants (bench/bench_validate.py's spec, 5 Dec
2026): about 49 s of the 123 program runs of an up of 41 stacks. `gpupool stacks` validates the spec once anyway
(the fingerprints, the refusal of an invalid spec); it hands that model to the programs in a file, written under
the project directory (`.gpupool/`, the command's own directory) and named in the environment of the pulumi
commands it runs (PATH_ENV), and removes the file when it ends.

The file holds a pickle, so it is believed only as far as its tag: an HMAC-SHA256 under a key drawn for this one
command and passed in the environment only (KEY_ENV). A file committed to the repository, or left by a killed run,
is never unpickled. And the model is used only while what it was built from is as it was: the spec file's bytes,
the tenant files its `tenantFiles` entries find now (by gpupool.spec.loader's own resolution) and their bytes, a
local chart's files, and the gpupool code that built it. On any difference, or anything unreadable, the program
validates the spec itself, exactly as without the file. The warnings travel with the model: each program logs them
as before.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gpupool
from gpupool import redact, safe_write
from gpupool.model import platform as m

PATH_ENV = "GPUPOOL_VALIDATED_SPEC"
KEY_ENV = "GPUPOOL_VALIDATED_SPEC_KEY"  # a secret: never printed, never in a file
DIRECTORY = ".gpupool"
MAGIC = b"gpupool-validated-spec/1\n"
LIMIT = 256 << 20  # bytes read at most (the model of 1,000 tenants pickles to about 0.4 MB)


@dataclass
class Offer:
    """The file this command wrote, and the environment that names it."""

    project_dir: Path
    name: str  # relative to project_dir
    digest: str  # of the file's bytes: what lets remove_proven delete it and nothing else
    env: dict[str, str]

    def withdraw(self) -> None:
        """Remove the file (only if it still is the one written) and the directory if that left it empty."""
        try:
            with safe_write.Directory.open(self.project_dir) as project:
                project.remove_proven(self.name, [self.digest])
                project.remove_empty_dir(DIRECTORY)
        except safe_write.Refused:
            pass  # left behind: harmless (no program believes it without this run's key)


def offer(project_dir: Path, spec_path: Path, result: Any) -> Offer | None:
    """Write RESULT (gpupool.rules.engine's result for SPEC_PATH, a valid spec) for this command's programs; None
    when it cannot be written (a read-only checkout, a link at `.gpupool`): the programs then validate."""
    if result.spec is None:
        return None
    entries = _entries(result)
    inputs = inputs_digest(spec_path, entries, result.spec)
    if inputs is None:
        return None
    warnings = [d.render() for d in result.report.sorted() if not d.is_error]
    payload = pickle.dumps(
        {
            "spec_path": str(spec_path.resolve()),
            "entries": entries,
            "inputs": inputs,
            "spec": result.spec,
            "warnings": warnings,
        },
        protocol=pickle.HIGHEST_PROTOCOL,
    )
    key = secrets.token_bytes(32)
    redact.register(key.hex())  # never printed by gpupool; masked should any pulumi text ever echo the environment
    blob = MAGIC + hmac.new(key, payload, hashlib.sha256).digest() + payload
    name = f"{DIRECTORY}/validated-spec.{secrets.token_hex(8)}"
    try:
        with safe_write.Directory.open(project_dir) as project:
            project.create(name, blob, make_parents=True)
    except safe_write.Refused:
        return None
    env = {PATH_ENV: str(project_dir.resolve() / name), KEY_ENV: key.hex()}
    return Offer(project_dir, name, safe_write.digest(blob), env)


def take(spec_path: Path, env: dict[str, str] | os._Environ[str] = os.environ) -> tuple[m.Spec, list[str]] | None:
    """The model and warnings a `gpupool stacks` command offered for SPEC_PATH, or None: no offer, a file this
    command's key did not sign, another spec, or inputs that changed since (the caller then validates)."""
    where, key_hex = env.get(PATH_ENV), env.get(KEY_ENV)
    if not where or not key_hex:
        return None
    try:
        key = bytes.fromhex(key_hex)
        blob = safe_write.read_input(where, LIMIT)
    except (ValueError, safe_write.Refused, OSError):
        return None
    tag, payload = blob[len(MAGIC) : len(MAGIC) + 32], blob[len(MAGIC) + 32 :]
    if not blob.startswith(MAGIC) or not hmac.compare_digest(tag, hmac.new(key, payload, hashlib.sha256).digest()):
        return None
    try:
        doc = pickle.loads(payload)  # signed by this command: written by it, from the spec it validated
    except Exception:  # noqa: BLE001 (a model of other code: validate instead)
        return None
    if doc.get("spec_path") != str(spec_path.resolve()):
        return None
    if inputs_digest(spec_path, doc["entries"], doc["spec"]) != doc["inputs"]:
        return None
    return doc["spec"], list(doc["warnings"])


def _entries(result: Any) -> list[str]:
    data = result.loaded.data if result.loaded is not None else None
    from gpupool.spec.loader import TENANT_INCLUDE_KEY

    entries = data.get(TENANT_INCLUDE_KEY) if isinstance(data, dict) else None
    return [e for e in entries or [] if isinstance(e, str)]


def inputs_digest(spec_path: Path, entries: list[str], spec: m.Spec) -> str | None:
    """sha256 over what the model was built from, as it is now: the gpupool code, the spec file, each entry's
    files as the loader finds them (names, and bytes of the ones it reads) and a local chart's files; None when
    something cannot be read or now leads out of the stack directory (the loader would refuse it: validate)."""
    from gpupool.deploy.stack_inputs import tree_digest
    from gpupool.spec.tenant_paths import tenant_files

    base = spec_path.parent
    root = os.path.join(str(base.resolve()), "")
    try:
        h = hashlib.sha256(_code_identity().encode())
        h.update(spec_path.read_bytes())
        for entry in entries:
            if not (base / entry).resolve().is_relative_to(root):
                return None
            found = tenant_files(entry, base)
            if not isinstance(found, tuple):
                return None  # it found nothing or cannot be used now: the loader says why
            files, skipped = found
            h.update(f"\0entry\0{entry}".encode())
            for shown, resolved, _ in files:
                if not str(resolved).startswith(root):
                    return None
                content = shown.read_bytes()
                h.update(f"\0file\0{shown.relative_to(base)}\0{len(content)}\0".encode() + content)
            h.update("\0skipped\0".join(str(p.relative_to(base)) for p in skipped).encode())
    except (OSError, RuntimeError, ValueError):  # unreadable, a symlink loop, a glob the loader refuses
        return None
    chart = spec.cluster.operator.chart_path
    if chart:
        h.update(f"\0chart\0{tree_digest(base / chart)}".encode())
    return h.hexdigest()


_CODE: str | None = None


def _code_identity() -> str:
    """The gpupool code that builds and judges a model: each module's path, size and modification time, and
    the package's version (a pickled model is only read back by the same code)."""
    global _CODE
    if _CODE is None:
        from gpupool.spec.schema import SPEC_SCHEMA

        root = Path(gpupool.__file__).resolve().parent
        parts = [getattr(gpupool, "__version__", "")]
        for path in [*sorted(root.rglob("*.py")), SPEC_SCHEMA]:
            st = path.stat()
            parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
        _CODE = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    return _CODE
