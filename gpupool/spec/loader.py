"""Load a spec (and the tenant files it includes) into plain data plus a source map.

PyYAML's C parser builds the node tree; we construct plain Python values from it ourselves so that
every value and every mapping key keeps the file, line and column it came from. Duplicate keys, which
PyYAML would silently collapse, are reported. Nothing here raises on bad input: problems become
diagnostics, and the caller decides whether the result is usable.
"""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpupool.spec import input_limits
from gpupool.spec.bounds import PULUMI_EXACT_INTEGER
from gpupool.spec.diagnostics import ERROR, WARNING, Location, Report
from gpupool.spec.paths import render_path, shown_key
from gpupool.spec.tenant_paths import Found, _inside, _is_yaml, escapes, tenant_files

# The C parser is ~10x faster; fall back for platforms without libyaml.
_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Path_ = tuple  # a path inside the spec: ("tenants", 3, "gpus", "nvidia.com/gpu")

TENANT_INCLUDE_KEY = "tenantFiles"

STDIN = "-"  # the spec path that means "read the spec from standard input"
STDIN_LABEL = "<stdin>"

# Rule ids of the problems found while loading, as plain strings (loading must not import the rules). The
# GP0xx ones are documented in gpupool.rules.loading, the GP8xx/GP9xx ones in gpupool.rules.input_files.
R_SYNTAX = "GP001"  # invalid YAML
R_UNREADABLE = "GP002"  # missing, a directory, not UTF-8, unreadable
R_NO_MAPPING = "GP003"  # empty, or only null
R_DUPLICATE_KEY = "GP004"  # a key repeated in one mapping
R_VALUE = "GP005"  # a YAML tag (on a value, a list or a mapping) or a value that cannot be read
R_ALIAS = "GP006"  # alias loops, alias bombs, merge keys that merge no mapping
R_KEY_NOT_TEXT = "GP007"  # a list or mapping as a key
R_INCLUDE = "GP008"  # tenantFiles entry that names nothing usable
R_PATH_ESCAPES = "GP805"  # tenantFiles entry is absolute or climbs out with ..
R_OUTSIDE_STACK = "GP806"  # a tenant file or directory resolves (through symlinks) outside the stack
R_NUMBER = "GP910"  # non-finite numbers (whole-number floats are read as integers)
R_INEXACT = "GP020"  # a whole number Pulumi cannot carry exactly (gpupool.spec.bounds)
R_DISCOVERY = "GP911"  # files a tenant directory holds that are not read
R_DOCUMENTS = "GP912"  # more than one document in a file

# Timestamps stay text: no spec field is a date, and `costCenter: 2024-01-01` means the label value, not a
# datetime (PyYAML would also raise a bare ValueError on `2024-13-01`).
_SCALAR_TAGS_AS_TEXT = {"tag:yaml.org,2002:str", "tag:yaml.org,2002:timestamp"}
_SCALAR_TAGS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
} | _SCALAR_TAGS_AS_TEXT
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"
# Helm values are passed to the chart as written; everywhere else a whole-number float (8.0) means the integer.
_VERBATIM = ("cluster", "gpuOperator", "values")
_SAFE_TAG = re.compile(r"^[!A-Za-z0-9:/._,%-]{1,64}$")
R_TOO_BIG = "GP022"  # a file, or a run's files together, above the input caps
R_TOO_DEEP = "GP023"  # values nested deeper than MAX_DEPTH
# Nesting depth (counted from the spec's root; a tenant file starts at 2). Real specs and chart values stay
# within about 12; render and the YAML emitter recurse per level, so 400 levels that validated crashed render.
MAX_DEPTH = 64


# Where a value starts: (file label, the parser's mark). A Location is made only when one is asked for:
# building one per value cost a fifth of loading 1,000 tenant files.
_Where = tuple


def _location(where: _Where) -> Location:
    file, mark = where
    return Location(file, mark.line + 1, mark.column + 1)


@dataclass
class SourceMap:
    """Where each value (and each mapping key) of the loaded data came from."""

    values: dict[Path_, _Where] = field(default_factory=dict)
    keys: dict[Path_, _Where] = field(default_factory=dict)
    # The position of each key a path may not show as text (gpupool.spec.paths), for paths rendered while
    # the data is still being built.
    positions: dict[Path_, int] = field(default_factory=dict)

    def value(self, path: Path_) -> Location:
        """Location of the value at path, or of its nearest located ancestor."""
        path = tuple(path)
        while path:
            where = self.values.get(path)
            if where is not None:
                return _location(where)
            path = path[:-1]
        root = self.values.get(())
        return _location(root) if root is not None else Location("<unknown>", 1, 1)

    def key(self, path: Path_) -> Location:
        """Location of the mapping key that names path (falls back to the value)."""
        where = self.keys.get(tuple(path))
        return _location(where) if where is not None else self.value(path)


@dataclass
class LoadedSpec:
    path: str
    data: Any
    source: SourceMap
    report: Report
    file_path: Path | None = None  # the spec on disk (path is the label shown in messages)
    # Keys the schema refused, and list items whose name it refused (gpupool.spec.schema): paths name them by
    # position, never by their text.
    refused: set[Path_] = field(default_factory=set)
    unnamed: set[Path_] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.report.errors

    def render(self, path: Path_) -> str:
        """The path as diagnostics show it: tenants[team-a].gpus["nvidia.com/gpu"], or gpus[key 2] for a key
        that was refused or is not plain text (refused input is named by its position, never quoted)."""
        return render_path(path, self.data, self.refused, unnamed=self.unnamed)


def _loc(file: str, mark) -> Location:
    return Location(file, mark.line + 1, mark.column + 1)


class _Builder:
    """Turns a composed node tree into plain data, recording locations as it goes."""

    def __init__(self, file: str, source: SourceMap, report: Report, budget: input_limits.Budget | None = None):
        self.file = file
        self.source = source
        self.report = report
        self.constructor = yaml.SafeLoader("")  # only its scalar constructors are used
        self.budget = budget or input_limits.Budget.start()
        self.too_deep = False  # reported once per file
        self.open: set[int] = set()  # collection nodes being built: an alias to one of them is a cycle

    def _render(self, path: Path_, refused: tuple = ()) -> str:
        # Loader messages name list items by index (the data is not built yet); validation renders paths
        # with tenant and pool names.
        return render_path(path, None, refused, self.source.positions)

    def build(self, node, path: Path_) -> Any:
        self.budget.values_left -= 1
        if self.budget.values_left < 0:
            raise input_limits.TooLarge
        self.source.values[path] = (self.file, node.start_mark)
        if len(path) > MAX_DEPTH:
            if not self.too_deep:
                self.too_deep = True
                self.report.add(
                    ERROR,
                    _loc(self.file, node.start_mark),
                    self._render(path[:MAX_DEPTH]),
                    f"values are nested more than {MAX_DEPTH} levels deep here; no spec or chart value needs that "
                    "many (flatten it)",
                    rule=R_TOO_DEEP,
                )
            return None
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            if id(node) in self.open:
                self.report.add(
                    ERROR,
                    _loc(self.file, node.start_mark),
                    self._render(path),
                    "this alias refers to a value that contains it (an endless loop); "
                    "repeat the content instead of the alias",
                    rule=R_ALIAS,
                )
                return None
            if node.tag not in (_MAP_TAG, _SEQ_TAG):
                kind = "mapping" if isinstance(node, yaml.MappingNode) else "list"
                self.report.add(
                    ERROR,
                    _loc(self.file, node.start_mark),
                    self._render(path),
                    f"the YAML tag {_tag(node.tag)} on this {kind} is not supported in a spec "
                    "(gpupool would otherwise drop it silently); remove the tag",
                    rule=R_VALUE,
                )
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
                self.report.add(
                    ERROR,
                    _loc(self.file, key_node.start_mark),
                    self._render(path),
                    "mapping keys must be plain strings, not lists or mappings",
                    rule=R_KEY_NOT_TEXT,
                )
                continue
            key = key_node.value  # keys stay text: `yes:` or `1g.10gb:` must not turn into bools/floats
            child = path + (key,)
            if key in out:
                # Named by the position of its first occurrence, and not repeated (refused input).
                first = self.source.keys.get(child)
                where = f" (first defined at line {_location(first).line})" if first else ""
                self.source.positions.setdefault(child, list(out).index(key))
                self.report.add(
                    ERROR,
                    _loc(self.file, key_node.start_mark),
                    self._render(child, refused=(child,)),
                    f"duplicate key{where}; each key may appear once",
                    rule=R_DUPLICATE_KEY,
                )
                continue
            if not shown_key(key):
                self.source.positions[child] = len(out)
            self.source.keys[child] = (self.file, key_node.start_mark)
            out[key] = self.build(value_node, child)
        here = self.source.values.get(path)
        for key_node, value_node in merges:
            pairs = self.merged_pairs(key_node, value_node, path, set())
            for key_node2, value_node2 in pairs or ():
                if key_node2.value not in out:
                    child = path + (key_node2.value,)
                    self.source.keys[child] = (self.file, key_node2.start_mark)
                    out[key_node2.value] = self.build(value_node2, child)
        if here is not None:
            self.source.values[path] = here
        return out

    def merged_pairs(self, key_node, value_node, path: Path_, visiting: set[int]) -> list | None:
        """The (key, value) nodes `<<: *base` (or a list of them) contributes, merges inside the merged
        mappings included (YAML merge is recursive: `<<: *mid` where mid itself merges *base gets base's keys
        too). Earlier sources win over later ones, and a mapping's own keys over the keys it merges."""
        sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        if not all(isinstance(n, yaml.MappingNode) for n in sources):
            self.report.add(
                ERROR,
                _loc(self.file, key_node.start_mark),
                self._render(path + ("<<",)),
                "a merge key `<<` takes a mapping alias such as *defaults (or a list of them)",
                rule=R_ALIAS,
            )
            return None
        pairs: list = []
        seen: set[str] = set()
        for source in sources:
            if id(source) in visiting:
                self.report.add(
                    ERROR,
                    _loc(self.file, key_node.start_mark),
                    self._render(path + ("<<",)),
                    "this merge refers to a mapping that merges itself (an endless loop)",
                    rule=R_ALIAS,
                )
                return None
            own, nested = [], []
            for k, v in source.value:
                if isinstance(k, yaml.ScalarNode) and k.tag == _MERGE_TAG:
                    nested.append((k, v))
                elif isinstance(k, yaml.ScalarNode):
                    own.append((k, v))
            for k, v in nested:
                own += self.merged_pairs(k, v, path, visiting | {id(source)}) or []
            for k, v in own:
                if k.value not in seen:
                    seen.add(k.value)
                    pairs.append((k, v))
        return pairs

    def build_scalar(self, node, path: Path_) -> Any:
        if node.tag in _SCALAR_TAGS_AS_TEXT:
            return node.value
        if node.tag not in _SCALAR_TAGS:  # !env, !!binary, !!python/...: nothing in a spec is tagged
            self.report.add(
                ERROR,
                _loc(self.file, node.start_mark),
                self._render(path),
                f"the YAML tag {_tag(node.tag)} is not supported in a spec; remove it (and quote "
                "the value if it is meant as text)",
                rule=R_VALUE,
            )
            return node.value
        try:
            value = self.constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError):
            # The value itself is not repeated: a tenant file is untrusted input that ends up in CI logs.
            self.report.add(
                ERROR,
                _loc(self.file, node.start_mark),
                self._render(path),
                f"cannot read this value as {node.tag.rsplit(':', 1)[-1]}; quote it to give text",
                rule=R_VALUE,
            )
            return node.value
        if isinstance(value, float):
            if not math.isfinite(value):
                self.report.add(
                    ERROR,
                    _loc(self.file, node.start_mark),
                    self._render(path),
                    "is not a finite number (.nan, .inf or too large to hold); give a number such as 1.5",
                    rule=R_NUMBER,
                )
                return None
            # 8.0 is 8: integer fields (counts, indices, quotas) then never see a float later on.
            if value.is_integer() and path[:3] != _VERBATIM:
                value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > PULUMI_EXACT_INTEGER:
            self.report.add(
                ERROR,
                _loc(self.file, node.start_mark),
                self._render(path),
                f"is a whole number beyond {PULUMI_EXACT_INTEGER:,} (2^53 - 1), the largest Pulumi carries "
                "exactly (its wire format is a 64-bit float, so the cluster would get another number); "
                "give a smaller number, or quote it if it is meant as text",
                rule=R_INEXACT,
            )
            return None
        return value


def _tag(tag: str) -> str:
    short = tag.replace("tag:yaml.org,2002:", "!!")
    return short if _SAFE_TAG.match(short) else "(a custom tag)"


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of a byte offset."""
    before = data[:offset]
    line_start = before.rfind(b"\n") + 1
    return before.count(b"\n") + 1, len(before[line_start:].decode("utf-8", "replace")) + 1


# What the parser quotes from its own grammar (punctuation, token names): safe to show, and the message is
# unreadable without it ("did not find expected ',' or ']'").
_GRAMMAR = re.compile(r"[-,\[\]{}:?|>!&*%@`#]|<[a-z ]{3,20}>")


def _unquoted(problem: str) -> str:
    """A YAML parser message with any quoted piece of the file left out (the location points at it); the
    parser's own tokens stay."""

    def piece(m: re.Match) -> str:
        inner = m.group(0)[1:-1]
        return m.group(0) if _GRAMMAR.fullmatch(inner) else "(at this position)"

    return re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", piece, problem)


def _document_start(text: str, file_label: str, mark) -> Location:
    """Where the `---` that opens the document at mark is (the line of its content when none is found)."""
    lines = text.splitlines()
    for n in range(min(mark.line, len(lines) - 1), -1, -1):
        if lines[n].startswith("---"):
            return Location(file_label, n + 1, 1)
    return _loc(file_label, mark)


def _empty_document(node) -> bool:
    """A document with nothing in it: what a trailing `---` (or a lone `---`) leaves."""
    return (
        isinstance(node, yaml.ScalarNode)
        and node.tag == "tag:yaml.org,2002:null"
        and node.value == ""
        and not node.style
    )


def load_yaml_file(
    path: Path,
    file_label: str,
    source: SourceMap,
    report: Report,
    base_path: Path_ = (),
    raw: bytes | None = None,
    budget: input_limits.Budget | None = None,
) -> tuple[bool, Any]:
    """Parse one YAML file (or RAW, its bytes already read). Returns (ok, data); problems go to report.

    A file holds one document. A `---` before it, and an empty document after it (a trailing `---`), are
    accepted; a second document with content is an error, since one file is one spec or one tenant.
    Messages never repeat the file's content: tenant files are untrusted input and errors end up in CI logs.
    """
    start = Location(file_label, 1, 1)
    budget = budget or input_limits.Budget.start()
    text = _read_text(path, raw, file_label, start, report, budget)
    if text is None:
        return False, None
    documents = _compose_documents(text, file_label, start, report)
    if documents is None:
        return False, None
    node = _single_mapping_node(documents, text, file_label, start, report)
    if node is None:
        return False, None
    return _build_document(node, file_label, start, source, report, base_path, budget)


def _read_text(
    path: Path, raw: bytes | None, file_label: str, start: Location, report: Report, budget: input_limits.Budget
) -> str | None:
    """The file's text (read within the input caps unless RAW is given), or None once why not is reported."""
    try:
        data = input_limits.read_regular(path, budget) if raw is None else raw
        return data.decode("utf-8")
    except input_limits.Refused as exc:
        report.add(ERROR, start, "", str(exc), rule=R_TOO_BIG)
        return None
    except FileNotFoundError:
        report.add(ERROR, start, "", "file not found", rule=R_UNREADABLE)
        return None
    except IsADirectoryError:
        report.add(ERROR, start, "", "is a directory; expected a YAML file", rule=R_UNREADABLE)
        return None
    except UnicodeDecodeError as exc:
        line, col = _position(data, exc.start)
        report.add(
            ERROR,
            Location(file_label, line, col),
            "",
            f"not UTF-8 text: byte 0x{data[exc.start]:02X} here is not valid UTF-8 ({exc.reason}); "
            "save the file as UTF-8",
            rule=R_UNREADABLE,
        )
        return None
    except OSError as exc:
        report.add(ERROR, start, "", f"cannot read file: {exc.strerror}", rule=R_UNREADABLE)
        return None


def _compose_documents(text: str, file_label: str, start: Location, report: Report) -> list | None:
    """TEXT's non-empty documents, up to the second (a file holds one), or None once its syntax error is reported."""
    try:
        documents = []
        for doc in yaml.compose_all(text, Loader=_Loader):
            if not _empty_document(doc):
                documents.append(doc)
            if len(documents) > 1:
                break
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = _loc(file_label, mark) if mark else start
        problem = _unquoted(exc.problem or "invalid YAML")
        context = f" ({_unquoted(exc.context)})" if exc.context else ""
        report.add(ERROR, where, "", f"invalid YAML: {problem}{context}", rule=R_SYNTAX)
        return None
    except yaml.reader.ReaderError as exc:
        before = text[: exc.position]
        where = Location(file_label, before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1)
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        report.add(
            ERROR,
            where,
            "",
            f"invalid YAML: character U+{ord(char):04X} is not allowed ({exc.reason}); "
            "remove it, or write it as an escape inside a double-quoted string",
            rule=R_SYNTAX,
        )
        return None
    except yaml.YAMLError:
        report.add(ERROR, start, "", "invalid YAML", rule=R_SYNTAX)
        return None
    except RecursionError:
        report.add(ERROR, start, "", "invalid YAML: values are nested too deeply to read", rule=R_SYNTAX)
        return None
    return documents


def _single_mapping_node(documents: list, text: str, file_label: str, start: Location, report: Report) -> Any:
    """The file's one document, or None once it is reported as a second document, empty, or only null."""
    if len(documents) > 1:
        report.add(
            ERROR,
            _document_start(text, file_label, documents[1].start_mark),
            "",
            "invalid YAML: expected one document, but found another document; a file holds one spec "
            "or one tenant (a trailing `---` alone is fine)",
            rule=R_DOCUMENTS,
        )
        return None
    node = documents[0] if documents else None
    if node is None:
        report.add(ERROR, start, "", "file is empty; expected a YAML mapping", rule=R_NO_MAPPING)
        return None
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
        report.add(
            ERROR,
            _loc(file_label, node.start_mark),
            "",
            "the file holds only an empty value (null); expected a YAML mapping",
            rule=R_NO_MAPPING,
        )
        return None
    return node


def _build_document(
    node,
    file_label: str,
    start: Location,
    source: SourceMap,
    report: Report,
    base_path: Path_,
    budget: input_limits.Budget,
) -> tuple[bool, Any]:
    """(ok, data) from the document's node tree, within the run's value budget (aliases count as expanded)."""
    builder = _Builder(file_label, source, report, budget)
    try:
        return True, builder.build(node, base_path)
    except input_limits.TooLarge:
        report.add(
            ERROR,
            start,
            "",
            f"the files of this run hold more than {budget.limits.values:,} values in all, counting what "
            "aliases expand to; write the values out instead of nesting aliases (no real spec comes near this)",
            rule=R_ALIAS,
        )
    except RecursionError:
        report.add(
            ERROR, start, "", "values are nested too deeply to read; a spec needs only a few levels", rule=R_SYNTAX
        )
    return False, None


def _display_name(path: Path, cwd: Path) -> str:
    # The file's own name is kept (not resolved): a symlink is shown as the link, never as where it points.
    try:
        return str((path.parent.resolve() / path.name).relative_to(cwd.resolve()))
    except ValueError:
        return str(path)


def load_spec(spec_path: str | Path, *, cwd: Path | None = None, stdin=None) -> LoadedSpec:
    """Load a stack spec and splice in the tenant files it includes (`tenantFiles`).

    A spec path of `-` reads the spec from STDIN (default: the process's standard input); its relative
    paths (tenantFiles, chartPath) then resolve against the current directory, as there is no spec file."""
    cwd = cwd or Path.cwd()
    raw = None
    source = SourceMap()
    report = Report()
    budget = input_limits.Budget.start()
    if str(spec_path) == STDIN:
        spec_path, label = cwd / STDIN_LABEL, STDIN_LABEL  # its parent, the spec directory, is cwd
        try:
            raw = input_limits.read_stdin(stdin if stdin is not None else sys.stdin.buffer, budget)
        except input_limits.Refused as exc:
            report.add(ERROR, Location(label, 1, 1), "", str(exc), rule=R_TOO_BIG)
            return LoadedSpec(label, None, source, report, spec_path)
    else:
        spec_path = Path(spec_path)
        label = _display_name(spec_path, cwd) if spec_path.is_absolute() else str(spec_path)
    ok, data = load_yaml_file(spec_path, label, source, report, raw=raw, budget=budget)
    if not ok:
        return LoadedSpec(label, None, source, report, spec_path)
    if isinstance(data, dict) and TENANT_INCLUDE_KEY in data:
        _include_tenants(data, spec_path, cwd, source, report, budget)
    return LoadedSpec(label, data, source, report, spec_path)


def _include_tenants(
    data: dict, spec_path: Path, cwd: Path, source: SourceMap, report: Report, budget: input_limits.Budget
) -> None:
    entries = data.get(TENANT_INCLUDE_KEY)
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return  # the schema reports the wrong type
    tenants = data.get("tenants")
    if tenants is None:
        tenants = data["tenants"] = []
    if not isinstance(tenants, list):
        return  # the schema reports the wrong type
    base = spec_path.parent
    # The stack directory: no tenant file is read from outside it. String prefix tests (with the trailing
    # separator): pathlib's relative_to cost more than parsing a file.
    root = base.resolve()
    root_prefix = os.path.join(str(root), "")
    cwd_prefix = os.path.join(str(cwd.resolve()), "")
    seen: set[Path] = {spec_path.resolve()}  # `tenantFiles: [.]` must not read the spec as a tenant
    for i, entry in enumerate(entries):
        if not entry:
            continue  # the schema reports the empty entry; "" would otherwise mean the spec's own directory
        where, at = source.value((TENANT_INCLUDE_KEY, i)), f"{TENANT_INCLUDE_KEY}[{i}]"
        found = _entry_files(entry, base, root, where, at, report)
        if found is None:
            continue
        files, skipped = found
        _warn_skipped(skipped, entry, cwd, where, at, report)
        for path, resolved, named in files:
            # The label is the file as named (a symlink shows as the link, never as where it points).
            text = str(named)
            label = text[len(cwd_prefix) :] if text.startswith(cwd_prefix) else str(path)
            if not str(resolved).startswith(root_prefix):
                # Never read, never quoted: it may be anything (a credentials file, a device).
                report.add(
                    ERROR,
                    where,
                    at,
                    f"{label} resolves (through a symlink) to a file outside the stack "
                    "directory; it is not read. Tenant files must live inside the stack directory: copy the "
                    "file in instead of linking it",
                    rule=R_OUTSIDE_STACK,
                )
                continue
            if resolved in seen:
                continue
            seen.add(resolved)
            index = len(tenants)
            ok, tenant = load_yaml_file(path, label, source, report, base_path=("tenants", index), budget=budget)
            if ok:
                tenants.append(tenant)


def _entry_files(
    entry: str, base: Path, root: Path, where: Location, at: str, report: Report
) -> tuple[list[Found], list[Path]] | None:
    """The (files, skipped) an entry names, or None once reported as escaping the stack or naming nothing usable."""
    escape = escapes(entry)
    if escape:
        report.add(ERROR, where, at, f'"{entry}" {escape}', rule=R_PATH_ESCAPES)
        return None
    if (base / entry).exists() and not _inside(base / entry, root):
        report.add(
            ERROR,
            where,
            at,
            f'"{entry}" resolves (through a symlink) to a place outside the stack '
            "directory; it is not read. Tenant files must live inside the stack directory",
            rule=R_OUTSIDE_STACK,
        )
        return None
    found = tenant_files(entry, base)
    if isinstance(found, str):
        report.add(ERROR, where, at, f'"{entry}" {found}', rule=R_INCLUDE)
        return None
    if found is None:
        report.add(
            ERROR,
            where,
            at,
            f'"{entry}" matches no file or directory (relative to {base or "."}); '
            "give a directory of tenant files, a glob such as tenants/*.yaml, or a file",
            rule=R_INCLUDE,
        )
        return None
    return found


def _warn_skipped(skipped: list[Path], entry: str, cwd: Path, where: Location, at: str, report: Report) -> None:
    """Say why each skipped file is not read: a tenant file nobody reads is a quota that silently vanished."""
    for path in skipped:
        shown = _display_name(path, cwd)
        if path.is_symlink() and _is_yaml(path) and not path.exists():
            report.add(WARNING, where, at, f"{shown} is a symlink to nothing and is not read", rule=R_DISCOVERY)
        elif _is_yaml(path) and path.exists() and not path.is_dir():
            report.add(
                WARNING,
                where,
                at,
                f"{shown} is not a regular file (a FIFO, a device or a socket) and is not read",
                rule=R_DISCOVERY,
            )
        elif path.is_dir():
            report.add(
                WARNING,
                where,
                at,
                f"{shown}/ is a subdirectory and is not read (a directory entry reads "
                f'only the files directly in it); add "{entry.rstrip("/")}/{path.name}/" to tenantFiles, '
                f'or use a glob such as "{entry.rstrip("/")}/**/*.yaml"',
                rule=R_DISCOVERY,
            )
        else:
            report.add(WARNING, where, at, f"{shown} is not read: tenant files end in .yaml or .yml", rule=R_DISCOVERY)
