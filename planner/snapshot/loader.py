"""Files to decoded objects: the only part of the reader that touches the file system.

A source is a file, `-` (stdin, only when asked for by name) or a folder (every
*.yaml, *.yml, *.json inside, recursively, in sorted order). A file holds a `kind:
List`, a multi-document YAML stream, a single object, or JSON (decoded with
json.loads when it starts with `{` or `[`). Lists, nested or not, are flattened.
Anything that cannot be decoded, or a document that is not an object with kind and
apiVersion, is an InputError.

Hostile files are refused before they can cost much (REFERENCE §2 "Bad input"):
only regular files are opened (a FIFO would block forever, /dev/zero never ends),
each no larger than `Limits.max_file_bytes`, checked before reading; YAML aliases
may add at most `Limits.max_alias_nodes` nodes to a document (a kilobyte "billion
laughs" file otherwise expands to billions of objects) and may not refer to
themselves; nesting deeper than about a thousand levels is refused for JSON as
libyaml refuses it for YAML. A key given twice in one mapping is not an error here:
it is recorded (`Loaded.duplicates`) for the reader to report, as the API server
would reject such an object.

Every other reader comes through here too (`read_document`, `decode_document`: the
policy, Kueue's Configuration inside its ConfigMap, `--add-nodes` specs, kubeconfigs,
saved plans), so they share one set of bounds and one error, InputError (exit 2). The
scalars are built as Kubernetes' YAML-to-JSON step builds them: a tag Python cannot
build (`!!int abc`, an integer of 5,000 digits, `!!bool maybe`) is a YAML error at its
line, a timestamp stays its text, a number or boolean key becomes its text, and tags
with no JSON form (`!!binary`, `!!set`) are refused. Field types are then checked by
planner.k8s.fields, per object, so a bad field costs only its object. No schema
library sits on this path: pydantic or msgspec would validate whole documents at once,
where Kueue's rule is that one bad object leaves the others planned; and YAML
construction, not validation, is what a read costs (BENCHMARKS.md).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import yaml

from planner.base.errors import InputError
from planner.k8s.annotations import SNAPSHOT_TIME

if TYPE_CHECKING:   # libyaml's CSafeLoader where present: the same interface, typed as SafeLoader
    _BaseLoader = yaml.SafeLoader
else:
    _BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"
GIB = 2**30
MIB = 2**20


@dataclass(frozen=True)
class Limits:
    """What one read may cost; see the README's "Bad input" table."""

    # per file, checked before reading (--max-file-size): the L benchmark's 16,384 nodes and
    # 20,000 workloads are about 40 MB of JSON, so XL fits too, and a sparse 1 GiB file does not
    max_file_bytes: int = 512 * MIB
    max_alias_nodes: int = 1_000_000     # nodes YAML aliases may add to one document
    # objects in one snapshot: XL (65,536 nodes, 80,000 workloads and their pods) is far
    # below; a file of millions of empty objects is refused before planning multiplies them
    max_objects: int = 4_000_000


DEFAULT_LIMITS = Limits()
MAX_DEPTH_TEXT = "about 1,000 levels"   # libyaml's limit; json's is Python's recursion limit


@dataclass
class Loaded:
    """Every object read, in read order, with the file it came from."""

    objects: list[tuple[str, dict[str, Any]]]
    digest: str
    snapshot_times: list[tuple[str, object]]   # (file, annotation value) of List objects
    # index in `objects` -> (field path, message) of a key given twice inside that object
    duplicates: dict[int, tuple[str, str]] = field(default_factory=dict)
    # (file, message) of keys given twice outside any object (a List's own keys)
    file_duplicates: list[tuple[str, str]] = field(default_factory=list)


# id(mapping) -> (the mapping, kept alive so that its id stays its own; the keys given twice)
Tainted = dict[int, tuple[dict[str, Any], list[str]]]


def expand(sources: Sequence[str]) -> list[str]:
    """Files to read, in order: each file as given, each folder's files sorted."""
    if isinstance(sources, str):
        sources = [sources]
    if not sources:
        raise InputError("no snapshot source given (expected files or folders)")
    files: list[str] = []
    for source in sources:
        if source == STDIN:
            files.append(source)
        elif os.path.isdir(source):
            found: list[str] = []
            for root, dirs, names in os.walk(source):
                dirs.sort()
                found.extend(os.path.join(root, n) for n in names if n.endswith(SUFFIXES))
            if not found:
                raise InputError("folder has no *.yaml, *.yml or *.json files", file=source)
            files.extend(sorted(found))
        elif os.path.lexists(source):
            files.append(source)
        else:
            raise InputError("no such file or folder", file=source)
    return files


def load(sources: Sequence[str], limits: Limits = DEFAULT_LIMITS) -> Loaded:
    digest = hashlib.sha256()
    loaded = Loaded([], "", [])
    for path in expand(sources):
        data = read_bytes(path, limits.max_file_bytes)
        digest.update(data)
        tainted: Tainted = {}
        first = len(loaded.objects)
        for index, doc in enumerate(decode(path, data, limits, tainted)):
            flatten(path, doc, f"document {index + 1}", loaded, None)
            if len(loaded.objects) > limits.max_objects:
                raise InputError(f"the snapshot holds more than {limits.max_objects:,} objects, the most one "
                                 "read takes", file=path)
        if tainted:
            locate_duplicates(path, loaded, first, tainted)
    loaded.digest = "sha256:" + digest.hexdigest()
    return loaded


# ---------------------------------------------------------------- reading bytes

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def read_bytes(path: str, limit: int = DEFAULT_LIMITS.max_file_bytes) -> bytes:
    """The whole file, if it is a regular file of at most `limit` bytes (or stdin, for `-`).

    Opened without blocking and checked on the open descriptor, so a FIFO or a device
    swapped in after a check is refused too, never read."""
    if path == STDIN:
        return _read_stdin(limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", file=path) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"is {file_kind(info.st_mode)}: only regular files are read "
                             f"(or stdin, given as -)", file=path)
        if info.st_size > limit:
            raise InputError(f"is {info.st_size:,} bytes, more than the limit of {limit:,} "
                             f"(--max-file-size)", file=path)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            return _read_limited(handle, path, limit, info.st_size)
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", file=path) from None
    finally:
        if fd >= 0:
            os.close(fd)


def _read_stdin(limit: int) -> bytes:
    """Stdin as a file: closed (`<&-`, so Python has no sys.stdin) or unreadable (a
    folder, a write-only descriptor) is an input error, never a crash."""
    if sys.stdin is None:
        raise InputError("stdin is closed: give a file, or pipe the snapshot in", file=STDIN)
    try:
        return _read_limited(sys.stdin.buffer, STDIN, limit)
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", file=STDIN) from None


def _read_limited(handle: Any, path: str, limit: int, expected: int = 0) -> bytes:
    """At most `limit` bytes, read in one call when the size is known (a buffer of the
    limit itself is never allocated); a file that grows past it while read is refused too."""
    chunks = [handle.read(min(expected, limit) + 1)]
    total = len(chunks[0])
    _text_only(path, chunks[0], 0)
    while total <= limit and (chunk := handle.read(min(1 << 20, limit + 1 - total))):
        _text_only(path, chunk, total)   # per chunk: /dev/zero on stdin stops at its first MiB
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise InputError(f"is more than the limit of {limit:,} bytes (--max-file-size)", file=path)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _text_only(path: str, chunk: bytes, offset: int) -> None:
    """YAML and JSON text never holds a NUL byte (a sparse file's holes, /dev/zero, a
    binary or UTF-16 file do): refused as soon as one is read."""
    at = chunk.find(b"\0")
    if at >= 0:
        raise InputError(f"holds a NUL byte (at byte {offset + at:,}): not YAML or JSON text "
                         "(a binary file, a sparse file's hole, or UTF-16?)", file=path)


# ---------------------------------------------------------------- decoding

def decode(path: str, data: bytes, limits: Limits = DEFAULT_LIMITS, tainted: Tainted | None = None) -> Iterator[Any]:
    """The documents of one file (None documents skipped); mappings with a key given
    twice go into `tainted`."""
    sink: Tainted = {} if tainted is None else tainted
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte {err.start})", file=path) from None
    head = text.lstrip()[:1]
    if head in ("{", "["):
        before = set(sink)
        try:
            yield _json(path, text, sink)
            return
        except InputError as err:
            for key in set(sink) - before:   # what the failed JSON read noted is not the YAML's
                del sink[key]
            # flow-style YAML starts with { or [ too: read as YAML when it is not JSON (JSON
            # is YAML, so nothing valid is read twice differently); if neither, JSON's message
            if not err.detail.startswith("malformed JSON at"):
                raise
            json_error = err
        try:
            documents = list(_yaml(path, text, limits, sink))
        except InputError:
            raise json_error from None
        yield from documents
        return
    yield from _yaml(path, text, limits, sink)


def _yaml(path: str, text: str, limits: Limits, sink: Tainted) -> Iterator[Any]:
    loader = _Loader(text, limits.max_alias_nodes, sink)
    try:
        while loader.check_data():   # type: ignore[no-untyped-call]  # types-PyYAML leaves check_data unannotated
            doc = loader.get_data()
            if doc is not None:
                yield doc
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise InputError(f"malformed YAML{where}: {problem}", file=path) from None
    except _Refused as err:
        raise InputError(str(err), file=path) from None
    except RecursionError:
        raise InputError(f"malformed YAML: nested deeper than {MAX_DEPTH_TEXT}", file=path) from None
    finally:
        loader.dispose()


def _json(path: str, text: str, tainted: Tainted) -> Any:
    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping = dict(pairs)
        if len(mapping) != len(pairs):
            tainted[id(mapping)] = (mapping, _twice([key for key, _ in pairs]))
        return mapping

    try:
        doc = json.loads(text, object_pairs_hook=pairs_hook)
    except json.JSONDecodeError as err:
        raise InputError(f"malformed JSON at line {err.lineno}, column {err.colno}: {err.msg}",
                         file=path) from None
    except RecursionError:
        raise InputError(f"malformed JSON: exceeded maximum nesting depth ({MAX_DEPTH_TEXT})", file=path) from None
    except ValueError as err:   # an integer of more than 4,300 digits
        raise InputError(f"malformed JSON: {str(err)[:120]}", file=path) from None
    check_text(path, text, doc)
    return doc


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def check_text(path: str, text: str, doc: Any) -> None:
    """JSON's `\\ud800` escapes decode to a lone UTF-16 surrogate, which is no character:
    it cannot be written as UTF-8, so a name holding one would break every output. Refused
    (the scan of the decoded document runs only when the text holds such an escape)."""
    if not _ESCAPED_SURROGATE.search(text):
        return
    where = lone_surrogate(doc)
    if where is not None:
        raise InputError("holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair), "
                         "which is not text", file=path, field=where)


def lone_surrogate(doc: Any) -> str | None:
    """The path of the first key or string holding a lone surrogate, or None (iterative)."""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        value, where = stack.pop()
        if type(value) is str:
            if _has_surrogate(value):
                return where or "(top level)"
        elif type(value) is dict:
            for key, child in value.items():
                if type(key) is str and _has_surrogate(key):
                    return f"{where}.{key.encode('utf-8', 'backslashreplace').decode()}".lstrip(".")
                stack.append((child, f"{where}.{key}" if where else str(key)))
        elif type(value) is list:
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(value))
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _twice(keys: list[Any]) -> list[str]:
    seen: set[Any] = set()
    out: list[str] = []
    for key in keys:
        if key in seen and str(key) not in out:
            out.append(str(key))
        seen.add(key)
    return out


class _Refused(Exception):
    """A YAML document the loader will not construct (message names why)."""


class _Loader(_BaseLoader):
    """libyaml's safe loader, checking each composed document before constructing it:
    how many nodes its aliases add (refused past the limit, or if one contains itself)
    and which mappings give a key twice (recorded, then constructed as usual)."""

    state_generators: list[Any]           # BaseConstructor's, declared for the type checker
    constructed_objects: dict[Any, Any]
    recursive_objects: dict[Any, Any]
    deep_construct: bool

    def __init__(self, text: str, max_alias_nodes: int, tainted: Tainted):
        super().__init__(text)
        self.max_alias_nodes = max_alias_nodes
        self.tainted = tainted

    def construct_document(self, node: Any) -> Any:
        twice = _check_graph(node, self.max_alias_nodes)
        # BaseConstructor.construct_document, keeping node -> object until the duplicates are noted
        data = self.construct_object(node)
        while self.state_generators:
            generators, self.state_generators = self.state_generators, []
            for generator in generators:
                for _ in generator:
                    pass
        for mapping_node, keys in twice:
            obj = self.constructed_objects.get(mapping_node)
            if type(obj) is dict:
                self.tainted[id(obj)] = (obj, keys)
        self.constructed_objects = {}
        self.recursive_objects = {}
        self.deep_construct = False
        return data


    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        # JSON has string keys only; Kubernetes' YAML-to-JSON step writes a bare number or
        # boolean key as its text (labels `1: x` is `"1": x`); anything else is refused
        mapping = super().construct_mapping(node, deep=deep)
        if all(type(key) is str for key in mapping):
            return mapping
        out: dict[Any, Any] = {}
        for key, value in mapping.items():
            text = _key_text(key)
            if text is None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"a mapping key must be a string, got {_kind_of(key)}", node.start_mark)
            out[text] = value
        return out


def _key_text(key: object) -> str | None:
    if type(key) is str:
        return key
    if type(key) is bool:
        return "true" if key else "false"
    if type(key) is int:
        return str(key)
    if type(key) is float and math.isfinite(key):
        return repr(key)
    return None


def _kind_of(value: object) -> str:
    return {type(None): "null", dict: "a mapping", list: "a list", tuple: "a list"}.get(type(value), type(value).__name__)


def _scalar(kind: str, build: Any) -> Any:
    """A constructor for one scalar tag that turns Python's own failure (int("abc"), an
    integer of more than 4,300 digits, !!bool maybe) into a YAML error at the value's line."""
    def construct(loader: Any, node: Any) -> Any:
        try:
            return build(loader, node)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as err:
            value = str(getattr(node, "value", ""))
            shown = value if len(value) <= 40 else f"{value[:40]}... ({len(value):,} characters)"
            raise yaml.constructor.ConstructorError(
                None, None, f"{shown!r} is not {kind} ({type(err).__name__}: {str(err)[:80]})",
                node.start_mark) from None
    return construct


def _timestamp_as_text(loader: Any, node: Any) -> str:
    # Kubernetes reads YAML as JSON, where a time is a string: `2026-01-31` stays the text
    # it is (month 13 or February 30 is then refused by the field that wants a time, if any)
    return str(loader.construct_scalar(node))


def _refused_tag(loader: Any, node: Any) -> Any:
    raise yaml.constructor.ConstructorError(
        None, None, f"the tag {node.tag!r} has no JSON equivalent: Kubernetes objects cannot hold it",
        node.start_mark)


_Loader.add_constructor("tag:yaml.org,2002:int", _scalar("an integer", yaml.constructor.SafeConstructor.construct_yaml_int))
_Loader.add_constructor("tag:yaml.org,2002:float", _scalar("a number", yaml.constructor.SafeConstructor.construct_yaml_float))
_Loader.add_constructor("tag:yaml.org,2002:bool", _scalar("true or false", yaml.constructor.SafeConstructor.construct_yaml_bool))
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)
for _tag in ("binary", "set", "omap", "pairs"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refused_tag)


_MERGE = "tag:yaml.org,2002:merge"


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_graph(root: Any, max_alias_nodes: int) -> list[tuple[Any, list[str]]]:
    """Walk a composed document once per distinct node (iteratively: depth costs no stack).

    Its size with every alias expanded, as a tree, must not pass the distinct nodes by
    more than `max_alias_nodes`; no node may contain itself. Returns the mapping nodes
    that give a key twice (merge keys `<<` excepted: they are meant to be overridden)."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    twice: list[tuple[Any, list[str]]] = []
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            if size[key] - len(size) > max_alias_nodes:
                raise _Refused(f"YAML aliases expand to more than {max_alias_nodes:,} extra nodes "
                               f"(an alias bomb?); refused")
            continue
        if key in size:
            continue
        if key in on_path:
            raise _Refused(f"a YAML alias refers to a node that contains it "
                           f"(line {node.start_mark.line + 1}); recursive documents are refused")
        on_path.add(key)
        stack.append((node, True))
        if isinstance(node, yaml.MappingNode):
            keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE]
            if len(set(keys)) != len(keys):
                twice.append((node, _twice(keys)))
        for child in _children(node):
            if id(child) not in size:
                stack.append((child, False))
    return twice


# ---------------------------------------------------------------- objects

def flatten(path: str, doc: Any, where: str, loaded: Loaded, inherit: tuple[str, str] | None) -> None:
    """Append the objects of `doc` (Lists and bare arrays unpacked, without recursion)."""
    work: list[tuple[Any, str, tuple[str, str] | None]] = [(doc, where, inherit)]
    while work:
        doc, where, inherit = work.pop()
        if type(doc) is list:   # a bare JSON array of objects
            work.extend((item, f"{where}, item {i + 1}", inherit) for i, item in reversed(list(enumerate(doc))))
            continue
        unpacked = _object(path, doc, where, loaded, inherit)
        if unpacked is not None:
            item_kind, items = unpacked
            work.extend((item, f"{where}, item {i + 1}", item_kind) for i, item in reversed(list(enumerate(items))))


def _object(path: str, doc: Any, where: str, loaded: Loaded,
            inherit: tuple[str, str] | None) -> tuple[tuple[str, str] | None, list[Any]] | None:
    """Append one object; for a List, its items (and the kind they inherit) instead."""
    if type(doc) is not dict:
        raise InputError(f"{where} is not an object (a mapping with kind and apiVersion), "
                         f"it is {type(doc).__name__}", file=path)
    kind = doc.get("kind")
    api_version = doc.get("apiVersion")
    if (kind is None or api_version is None) and inherit is not None:
        # API list responses (kind: NodeList) omit kind/apiVersion on their items; set in
        # place (not on a copy), so that a key given twice is still found in this mapping
        kind = kind or inherit[1]
        api_version = api_version or inherit[0]
        doc["kind"], doc["apiVersion"] = kind, api_version
    if type(kind) is not str or not kind:
        raise InputError(f"{where} has no kind", file=path, field="kind")
    if type(api_version) is not str or not api_version:
        name = _name_of(doc)
        raise InputError(f"{where} ({kind}{'/' + name if name else ''}) has no apiVersion",
                         file=path, field="apiVersion")
    items = doc.get("items")
    if kind.endswith("List") and (items is not None or kind == "List"):
        if items is not None and type(items) is not list:
            raise InputError(f"{where} ({kind}): items must be a list", file=path, field="items")
        metadata = doc.get("metadata")
        if type(metadata) is dict and type(metadata.get("annotations")) is dict:
            stamp = metadata["annotations"].get(SNAPSHOT_TIME)
            if stamp is not None:
                loaded.snapshot_times.append((path, stamp))
        return ((api_version, kind[:-4]) if kind != "List" else None), list(items or ())
    loaded.objects.append((path, doc))
    return None


def locate_duplicates(path: str, loaded: Loaded, first: int, tainted: Tainted) -> None:
    """Which objects read from `path` (from index `first`) hold a mapping with a key given
    twice, and where; what is in no object was a List's own key."""
    found: set[int] = set()
    for index in range(first, len(loaded.objects)):
        where = _find_tainted(loaded.objects[index][1], tainted)
        if where is not None:
            field_path, key_id = where
            found.add(key_id)
            shown = ", ".join(repr(k) for k in tainted[key_id][1])
            loaded.duplicates[index] = (field_path or "(top level)", f"key {shown} given twice (the last value "
                                                                     "would win silently)")
    for key_id, (_, keys) in tainted.items():
        if key_id not in found:
            loaded.file_duplicates.append(
                (path, f"key {', '.join(repr(k) for k in keys)} given twice outside any object "
                       "(the earlier value was dropped)"))


def _find_tainted(obj: dict[str, Any], tainted: Tainted) -> tuple[str, int] | None:
    """(field path, id) of the first tainted mapping in `obj`, depth first, each mapping once."""
    seen: set[int] = set()
    stack: list[tuple[Any, str]] = [(obj, "")]
    while stack:
        value, where = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if type(value) is dict:
            if id(value) in tainted:
                return where, id(value)
            for key, child in reversed(list(value.items())):
                if type(child) in (dict, list):
                    stack.append((child, f"{where}.{key}" if where else str(key)))
        elif type(value) is list:
            for i, child in reversed(list(enumerate(value))):
                if type(child) in (dict, list):
                    stack.append((child, f"{where}[{i}]"))
    return None


def _name_of(doc: dict[str, Any]) -> str:
    metadata = doc.get("metadata")
    name = metadata.get("name") if type(metadata) is dict else None
    return name if type(name) is str else ""


# ---------------------------------------------------------------- side files and embedded text

def read_document(path: str, what: str, limits: Limits = DEFAULT_LIMITS, max_bytes: int | None = None) -> Any:
    """The one document of a side file (a capacity spec, a kubeconfig), read as snapshots
    are: a regular file (never a FIFO or device), at most `max_bytes` (default: the
    --max-file-size limit), aliases bounded, each scalar typed; a key given twice is
    refused (the last value would win silently). InputError names the file."""
    limit = limits.max_file_bytes if max_bytes is None else min(max_bytes, limits.max_file_bytes)
    return decode_document(path, read_bytes(path, limit), what, limits)


def decode_document(label: str, data: bytes | str, what: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The one document in `data` (None when empty), decoded by the snapshot's bounded
    decoder; more than one document, or a key given twice, is an InputError on `label`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    _text_only(label, raw, 0)
    tainted: Tainted = {}
    documents = list(decode(label, raw, limits, tainted))
    if len(documents) > 1:
        raise InputError(f"holds {len(documents)} YAML documents; {what} is one", file=label)
    document = documents[0] if documents else None
    if tainted:
        where = _find_tainted(document, tainted) if type(document) is dict else None
        keys = next(iter(tainted.values()))[1] if where is None else tainted[where[1]][1]
        shown = ", ".join(repr(k) for k in keys)
        raise InputError(f"key {shown} given twice (the last value would win silently); {what} must be "
                         "unambiguous", file=label, field=(where[0] if where else "") or "")
    return document


def refuse_overwriting(outputs: Sequence[tuple[str, str | None]], inputs: Sequence[str | None]) -> None:
    """An output (flag, path) that is one of the input files (or inside an input folder) is
    refused before anything is read: writing the plan over the snapshot would lose it."""
    sources: list[tuple[str, os.stat_result]] = []
    for source in inputs:
        if source and source != STDIN:
            try:
                sources.append((source, os.stat(source)))
            except OSError:
                continue
    for flag, path in outputs:
        if not path or path == STDIN:
            continue
        target = os.path.realpath(path)
        try:
            info: os.stat_result | None = os.stat(path)
        except OSError:
            info = None
        for source, source_info in sources:
            if info is not None and (info.st_dev, info.st_ino) == (source_info.st_dev, source_info.st_ino):
                raise InputError(f"is also an input ({source}): the output would replace it", file=path, field=flag)
            if stat.S_ISDIR(source_info.st_mode) and target.startswith(os.path.realpath(source) + os.sep) \
                    and target.endswith(SUFFIXES):
                raise InputError(f"is inside the input folder {source}, whose *.yaml/*.json files are read: "
                                 "the next read would take the output as input", file=path, field=flag)
