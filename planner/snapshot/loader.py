"""Files to decoded objects: the only part of the reader that touches the file system.

A source is a file or a folder (every *.yaml, *.yml, *.json inside, recursively,
in sorted order). A file holds a `kind: List`, a multi-document YAML stream, a
single object, or JSON (decoded with json.loads when it starts with `{` or `[`).
Lists, nested or not, are flattened. Anything that cannot be decoded, or a
document that is not an object with kind and apiVersion, is an InputError.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import yaml  # type: ignore[import-untyped, unused-ignore]

from planner.errors import InputError

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _Loader = yaml.SafeLoader

SUFFIXES = (".yaml", ".yml", ".json")
SNAPSHOT_TIME = "stowplan.io/snapshot-time"


@dataclass
class Loaded:
    """Every object read, in read order, with the file it came from."""

    objects: list[tuple[str, dict[str, Any]]]
    digest: str
    snapshot_times: list[tuple[str, object]]   # (file, annotation value) of List objects


def expand(sources: Sequence[str]) -> list[str]:
    """Files to read, in order: each file as given, each folder's files sorted."""
    if isinstance(sources, str):
        sources = [sources]
    if not sources:
        raise InputError("no snapshot source given (expected files or folders)")
    files: list[str] = []
    for source in sources:
        if os.path.isdir(source):
            found: list[str] = []
            for root, dirs, names in os.walk(source):
                dirs.sort()
                found.extend(os.path.join(root, n) for n in names if n.endswith(SUFFIXES))
            if not found:
                raise InputError("folder has no *.yaml, *.yml or *.json files", file=source)
            files.extend(sorted(found))
        elif os.path.exists(source):
            files.append(source)
        else:
            raise InputError("no such file or folder", file=source)
    return files


def load(sources: Sequence[str]) -> Loaded:
    digest = hashlib.sha256()
    loaded = Loaded([], "", [])
    for path in expand(sources):
        data = read_bytes(path)
        digest.update(data)
        for index, doc in enumerate(decode(path, data)):
            flatten(path, doc, f"document {index + 1}", loaded, None)
    loaded.digest = "sha256:" + digest.hexdigest()
    return loaded


def read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", file=path) from None


def decode(path: str, data: bytes) -> Iterator[Any]:
    """The documents of one file (None documents skipped)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte {err.start})", file=path) from None
    head = text.lstrip()[:1]
    if head in ("{", "["):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(f"malformed JSON at line {err.lineno}, column {err.colno}: {err.msg}",
                             file=path) from None
        yield doc
        return
    try:
        for doc in yaml.load_all(text, Loader=_Loader):
            if doc is not None:
                yield doc
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise InputError(f"malformed YAML{where}: {problem}", file=path) from None


def flatten(path: str, doc: Any, where: str, loaded: Loaded, inherit: tuple[str, str] | None) -> None:
    if type(doc) is list:   # a bare JSON array of objects
        for i, item in enumerate(doc):
            flatten(path, item, f"{where}, item {i + 1}", loaded, inherit)
        return
    if type(doc) is not dict:
        raise InputError(f"{where} is not an object (a mapping with kind and apiVersion), "
                         f"it is {type(doc).__name__}", file=path)
    kind = doc.get("kind")
    api_version = doc.get("apiVersion")
    if (kind is None or api_version is None) and inherit is not None:
        # API list responses (kind: NodeList) omit kind/apiVersion on their items
        kind = kind or inherit[1]
        api_version = api_version or inherit[0]
        doc = {**doc, "kind": kind, "apiVersion": api_version}
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
        item_kind = (api_version, kind[:-4]) if kind != "List" else None
        for i, item in enumerate(items or ()):
            flatten(path, item, f"{where}, item {i + 1}", loaded, item_kind)
        return
    loaded.objects.append((path, doc))


def _name_of(doc: dict[str, Any]) -> str:
    metadata = doc.get("metadata")
    name = metadata.get("name") if type(metadata) is dict else None
    return name if type(name) is str else ""
