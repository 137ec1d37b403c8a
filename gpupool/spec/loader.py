"""Load a spec (and the tenant files it includes) into plain data plus a source map.

PyYAML's C parser builds the node tree; we construct plain Python values from it ourselves so that
every value and every mapping key keeps the file, line and column it came from. Duplicate keys, which
PyYAML would silently collapse, are reported. Nothing here raises on bad input: problems become
diagnostics, and the caller decides whether the result is usable.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpupool.spec.diagnostics import ERROR, Location, Report

# The C parser is ~10x faster; fall back for platforms without libyaml.
_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Path_ = tuple  # a path inside the spec: ("tenants", 3, "gpus", "nvidia.com/gpu")

TENANT_INCLUDE_KEY = "tenantFiles"
STDIN = "-"  # the spec path that means "read the spec from standard input"
STDIN_LABEL = "<stdin>"
YAML_SUFFIXES = (".yaml", ".yml")

# Timestamps stay text: no spec field is a date, and `costCenter: 2024-01-01` means the label value, not a
# datetime (PyYAML would also raise a bare ValueError on `2024-13-01`).
_SCALAR_TAGS_AS_TEXT = {"tag:yaml.org,2002:str", "tag:yaml.org,2002:timestamp"}
_MERGE_TAG = "tag:yaml.org,2002:merge"
# Aliases can make a small file expand into a huge tree ("billion laughs"); no real spec comes near this.
MAX_VALUES = 2_000_000


class _TooLarge(Exception):
    pass


@dataclass
class SourceMap:
    """Where each value (and each mapping key) of the loaded data came from."""

    values: dict[Path_, Location] = field(default_factory=dict)
    keys: dict[Path_, Location] = field(default_factory=dict)

    def value(self, path: Path_) -> Location:
        """Location of the value at path, or of its nearest located ancestor."""
        path = tuple(path)
        while path:
            loc = self.values.get(path)
            if loc is not None:
                return loc
            path = path[:-1]
        return self.values.get((), Location("<unknown>", 1, 1))

    def key(self, path: Path_) -> Location:
        """Location of the mapping key that names path (falls back to the value)."""
        return self.keys.get(tuple(path)) or self.value(path)


@dataclass
class LoadedSpec:
    path: str
    data: Any
    source: SourceMap
    report: Report
    file_path: Path | None = None  # the spec on disk (path is the label shown in messages)

    @property
    def ok(self) -> bool:
        return not self.report.errors


def _loc(file: str, mark) -> Location:
    return Location(file, mark.line + 1, mark.column + 1)


class _Builder:
    """Turns a composed node tree into plain data, recording locations as it goes."""

    def __init__(self, file: str, source: SourceMap, report: Report):
        self.file = file
        self.source = source
        self.report = report
        self.constructor = yaml.SafeLoader("")  # only its scalar constructors are used
        self.count = 0
        self.open: set[int] = set()  # collection nodes being built: an alias to one of them is a cycle

    def build(self, node, path: Path_) -> Any:
        self.count += 1
        if self.count > MAX_VALUES:
            raise _TooLarge
        self.source.values[path] = _loc(self.file, node.start_mark)
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            if id(node) in self.open:
                self.report.add(ERROR, _loc(self.file, node.start_mark), _render(path),
                                "this alias refers to a value that contains it (an endless loop); "
                                "repeat the content instead of the alias", rule="GP006")
                return None
            self.open.add(id(node))
            try:
                if isinstance(node, yaml.MappingNode):
                    return self.build_mapping(node, path)
                return [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
            finally:
                self.open.discard(id(node))
        return self.build_scalar(node, path)

    def build_mapping(self, node, path: Path_) -> dict[str, Any]:
        out: dict[str, Any] = {}
        merges = []
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == _MERGE_TAG:
                merges.append((key_node, value_node))
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self.report.add(ERROR, _loc(self.file, key_node.start_mark), _render(path),
                                "mapping keys must be plain strings, not lists or mappings", rule="GP007")
                continue
            key = key_node.value  # keys stay text: `yes:` or `1g.10gb:` must not turn into bools/floats
            child = path + (key,)
            if key in out:
                first = self.source.keys.get(child)
                where = f" (first defined at line {first.line})" if first else ""
                self.report.add(ERROR, _loc(self.file, key_node.start_mark), _render(child),
                                f'duplicate key "{key}"{where}; each key may appear once', rule="GP004")
                continue
            self.source.keys[child] = _loc(self.file, key_node.start_mark)
            out[key] = self.build(value_node, child)
        for key_node, value_node in merges:
            self.merge(out, key_node, value_node, path)
        return out

    def merge(self, out: dict, key_node, value_node, path: Path_) -> None:
        """`<<: *base` (or a list of them): keys of the merged mappings that the mapping does not set itself."""
        sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        if not all(isinstance(n, yaml.MappingNode) for n in sources):
            self.report.add(ERROR, _loc(self.file, key_node.start_mark), _render(path + ("<<",)),
                            "a merge key `<<` takes a mapping alias such as *defaults (or a list of them)", rule="GP006")
            return
        here = self.source.values.get(path)
        for source in sources:
            for key_node2, value_node2 in source.value:
                if isinstance(key_node2, yaml.ScalarNode) and key_node2.tag != _MERGE_TAG \
                        and key_node2.value not in out:
                    child = path + (key_node2.value,)
                    self.source.keys[child] = _loc(self.file, key_node2.start_mark)
                    out[key_node2.value] = self.build(value_node2, child)
        if here is not None:
            self.source.values[path] = here

    def build_scalar(self, node, path: Path_) -> Any:
        if node.tag in _SCALAR_TAGS_AS_TEXT:
            return node.value
        try:
            value = self.constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError:
            self.report.add(ERROR, _loc(self.file, node.start_mark), _render(path),
                            f"the YAML tag {node.tag} is not supported in a spec; remove it (and quote "
                            f"{node.value!r} if it is meant as text)", rule="GP005")
            return node.value
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            self.report.add(ERROR, _loc(self.file, node.start_mark), _render(path),
                            f"cannot read value {node.value!r}: {getattr(exc, 'problem', None) or exc}; "
                            "quote it to give text", rule="GP005")
            return node.value
        if isinstance(value, float) and not math.isfinite(value):
            self.report.add(ERROR, _loc(self.file, node.start_mark), _render(path),
                            f"{node.value} is not a finite number; give a number such as 1.5", rule="GP005")
            return None
        return value


def _render(path: Path_) -> str:
    # A cheap rendering for loader messages; validation renders paths with tenant/pool names.
    from gpupool.spec.paths import render_path

    return render_path(path)


def load_yaml_file(path: Path, file_label: str, source: SourceMap, report: Report,
                   base_path: Path_ = (), raw: bytes | None = None) -> tuple[bool, Any]:
    """Parse one YAML file (or RAW, its bytes already read). Returns (ok, data); problems go to report."""
    start = Location(file_label, 1, 1)
    try:
        text = (path.read_bytes() if raw is None else raw).decode("utf-8")
    except FileNotFoundError:
        report.add(ERROR, start, "", "file not found", rule="GP002")
        return False, None
    except IsADirectoryError:
        report.add(ERROR, start, "", "is a directory; expected a YAML file", rule="GP002")
        return False, None
    except UnicodeDecodeError as exc:
        report.add(ERROR, start, "", f"not UTF-8 text ({exc.reason} at byte {exc.start}); save the file as UTF-8", rule="GP002")
        return False, None
    except OSError as exc:
        report.add(ERROR, start, "", f"cannot read file: {exc.strerror}", rule="GP002")
        return False, None
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = _loc(file_label, mark) if mark else start
        problem = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        report.add(ERROR, where, "", f"invalid YAML: {problem}{context}", rule="GP001")
        return False, None
    except yaml.reader.ReaderError as exc:
        before = text[: exc.position]
        where = Location(file_label, before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1)
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        report.add(ERROR, where, "", f"invalid YAML: character U+{ord(char):04X} is not allowed ({exc.reason}); "
                                     "remove it, or write it as an escape inside a double-quoted string", rule="GP001")
        return False, None
    except yaml.YAMLError as exc:
        report.add(ERROR, start, "", f"invalid YAML: {exc}", rule="GP001")
        return False, None
    except RecursionError:
        report.add(ERROR, start, "", "invalid YAML: values are nested too deeply to read", rule="GP001")
        return False, None
    if node is None:
        report.add(ERROR, start, "", "file is empty; expected a YAML mapping", rule="GP003")
        return False, None
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
        report.add(ERROR, _loc(file_label, node.start_mark), "",
                   f"the file holds only {node.value or 'null'!r}; expected a YAML mapping", rule="GP003")
        return False, None
    builder = _Builder(file_label, source, report)
    try:
        return True, builder.build(node, base_path)
    except _TooLarge:
        report.add(ERROR, start, "", f"aliases expand this file to more than {MAX_VALUES:,} values; "
                                     "write the values out instead of nesting aliases", rule="GP006")
    except RecursionError:
        report.add(ERROR, start, "", "values are nested too deeply to read; a spec needs only a few levels", rule="GP001")
    return False, None


def _display_name(path: Path, cwd: Path) -> str:
    try:
        return str(path.resolve().relative_to(cwd.resolve()))
    except ValueError:
        return str(path)


def load_spec(spec_path: str | Path, *, cwd: Path | None = None, stdin=None) -> LoadedSpec:
    """Load a stack spec and splice in the tenant files it includes (`tenantFiles`).

    A spec path of `-` reads the spec from STDIN (default: the process's standard input); its relative
    paths (tenantFiles, chartPath) then resolve against the current directory, as there is no spec file."""
    cwd = cwd or Path.cwd()
    raw = None
    if str(spec_path) == STDIN:
        raw = (stdin if stdin is not None else sys.stdin.buffer).read()
        spec_path, label = cwd / STDIN_LABEL, STDIN_LABEL  # its parent, the spec directory, is cwd
    else:
        spec_path = Path(spec_path)
        label = _display_name(spec_path, cwd) if spec_path.is_absolute() else str(spec_path)
    source = SourceMap()
    report = Report()
    ok, data = load_yaml_file(spec_path, label, source, report, raw=raw)
    if not ok:
        return LoadedSpec(label, None, source, report, spec_path)
    if isinstance(data, dict) and TENANT_INCLUDE_KEY in data:
        _include_tenants(data, spec_path, cwd, source, report)
    return LoadedSpec(label, data, source, report, spec_path)


def _tenant_files(entry: str, base: Path) -> list[tuple[Path, Path]] | str | None:
    """(path as named, resolved path) of each file an entry names; None when it names nothing, or a message
    when the entry cannot be used."""
    if "\0" in entry:
        return "contains a NUL character; give a path such as tenants/"
    target = (base / entry)
    try:
        if target.is_dir():
            return _directory_files(target)
        if any(ch in entry for ch in "*?["):
            if Path(entry).is_absolute():
                return "is an absolute glob; write globs relative to the spec, such as tenants/*.yaml"
            return sorted((p, p.resolve()) for p in base.glob(entry) if p.is_file())
        if target.is_file():
            return [(target, target.resolve())]
    except ValueError as exc:  # e.g. "'**' can only be an entire path component"
        return f"is not a usable glob ({exc}); use a pattern such as tenants/*.yaml or tenants/**/*.yaml"
    except OSError as exc:
        return f"cannot be read ({exc.strerror}); give a readable directory, glob or file"
    return None


def _directory_files(directory: Path) -> list[tuple[Path, Path]]:
    """The YAML files of a directory. The directory is resolved once; a plain file in it is then resolved by
    its name alone (only symlinks need the file system again): with 1,000 tenant files, resolving each path
    cost more than parsing it."""
    resolved_dir = directory.resolve()
    out = []
    with os.scandir(directory) as it:
        for e in it:
            if os.path.splitext(e.name)[1] in YAML_SUFFIXES and e.is_file():
                resolved = (directory / e.name).resolve() if e.is_symlink() else resolved_dir / e.name
                out.append((directory / e.name, resolved))
    return sorted(out)


def _include_tenants(data: dict, spec_path: Path, cwd: Path, source: SourceMap, report: Report) -> None:
    entries = data.get(TENANT_INCLUDE_KEY)
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return  # the schema reports the wrong type
    tenants = data.get("tenants")
    if tenants is None:
        tenants = data["tenants"] = []
    if not isinstance(tenants, list):
        return  # the schema reports the wrong type
    base = spec_path.parent
    cwd_prefix = os.path.join(str(cwd.resolve()), "")  # with the trailing separator
    seen: set[Path] = {spec_path.resolve()}  # `tenantFiles: [.]` must not read the spec as a tenant
    for i, entry in enumerate(entries):
        if not entry:
            continue  # the schema reports the empty entry; "" would otherwise mean the spec's own directory
        files = _tenant_files(entry, base)
        if isinstance(files, str):
            report.add(ERROR, source.value((TENANT_INCLUDE_KEY, i)), f"{TENANT_INCLUDE_KEY}[{i}]",
                       f'"{entry}" {files}', rule="GP008")
            continue
        if files is None:
            report.add(ERROR, source.value((TENANT_INCLUDE_KEY, i)), f"{TENANT_INCLUDE_KEY}[{i}]",
                       f'"{entry}" matches no file or directory (relative to {base or "."}); '
                       "give a directory of tenant files, a glob such as tenants/*.yaml, or a file", rule="GP008")
            continue
        for path, resolved in files:
            if resolved in seen:
                continue
            seen.add(resolved)
            index = len(tenants)
            text = str(resolved)  # a string prefix test: pathlib's relative_to cost more than parsing a file
            label = text[len(cwd_prefix):] if text.startswith(cwd_prefix) else str(path)
            ok, tenant = load_yaml_file(path, label, source, report, base_path=("tenants", index))
            if ok:
                tenants.append(tenant)
