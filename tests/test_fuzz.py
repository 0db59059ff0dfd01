"""Seeded fuzzing of `stowplan what-if` (issue 23): every fixture, mutated at random as
a hostile or careless user would (truncation, type swaps, deletions, duplications,
huge and non-finite numbers, unicode and control characters, keys given twice, broken
bytes), must plan (exit 0), or be refused with one clean error (exit 2), or fail
verification (exit 3): never exit 1, never a traceback, never a hang.

Each case is (fixture, seed): a failure names both, and `mutated(fixture, seed)`
rebuilds the exact file. The default run is small enough for the default suite
(tens of seconds); STOWPLAN_FUZZ_SEEDS=N runs N seeds per fixture by hand.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import signal
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from click.testing import CliRunner

from planner import cli as cli_module

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SMALL = sorted(p.name for p in FIXTURES.glob("*.yaml") if not p.name.endswith(".plan.yaml"))
LARGE = sorted(p.name for p in FIXTURES.glob("*.json"))
SEEDS = int(os.environ.get("STOWPLAN_FUZZ_SEEDS", "0"))
CASES = [(name, seed) for name in SMALL for seed in range(SEEDS or 8)] + \
        [(name, seed) for name in LARGE for seed in range(SEEDS or 2)]
HANG = 180          # seconds: only to stop a hang, never a speed check
TIME_LIMIT = "1"    # the cycle's own limit, which planning must keep to

DEEP = "__deep__"
STRANGE = ["", " ", "0", "-1", "1e308", "-1e308", "NaN", "Infinity", "99999999999999999999Ei", "1.5.3",
           "名前", "\u202eevil", "\x1b]0;title\x07", "line\nbreak", "tab\there", "emoji 🚀🔥", "\u0000", "a" * 5000,
           "kubernetes.io/hostname", "true", "null", "{", "[}", "*alias", "&anchor", "!!python/object"]
NUMBERS = [0, -1, 1, 2**31, 2**53, 2**62, 2**63, 10**30, -(10**30), 1e308, -1e308, 0.5, 1e-300, float("nan"), float("inf")]


def _slots(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) in the tree: where a mutation can land."""
    out: list[tuple[Any, Any]] = []
    stack = [doc]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            out.append((node, key))
            if isinstance(value, (dict, list)):
                stack.append(value)
    return out


# Stowplan's own annotations and Kueue's, with values a careless or hostile user might write
ANNOTATIONS = [
    ("stowplan.io/preemption-cost", ["1e308", "-5", "NaN", "inf", "1e9", "0"]),
    ("stowplan.io/assignment", ['[{"name":"main","count":1,"flavors":{"nvidia.com/gpu":"ghost","cpu":"ghost"},'
                                '"topologyAssignment":{"levels":["kubernetes.io/hostname"],'
                                '"domains":[{"values":["no-such-node"],"count":1}]}}]', "[", "[]", "{}"]),
    ("stowplan.io/admitted-at", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "yesterday"]),
    ("stowplan.io/non-preemptible", ["true", "yes"]),
    ("kueue.x-k8s.io/job-min-parallelism", ["0", "1", "99999999999"]),
]
TEMPLATE_ANNOTATIONS = [
    ("kueue.x-k8s.io/podset-required-topology", ["no-such-level", "kubernetes.io/hostname", ""]),
    ("kueue.x-k8s.io/podset-slice-required-topology", ["no-such-level"]),
    ("kueue.x-k8s.io/podset-slice-size", ["0", "3", "1e9"]),
]


def _annotate(rng: random.Random, doc: Any) -> None:
    """Set one of Stowplan's or Kueue's annotations, badly, on a random Job."""
    jobs = [o for o in _objects(doc) if o.get("kind") == "Job"]
    if not jobs:
        return
    job = rng.choice(jobs)
    if rng.random() < 0.5:
        key, values = rng.choice(ANNOTATIONS)
        meta = job.setdefault("metadata", {})
        if not isinstance(meta, dict):
            return
        target = meta
    else:
        key, values = rng.choice(TEMPLATE_ANNOTATIONS)
        template = (job.get("spec") or {}).get("template") if isinstance(job.get("spec"), dict) else None
        if not isinstance(template, dict):
            return
        target = template.setdefault("metadata", {})
        if not isinstance(target, dict):
            return
    annotations = target.setdefault("annotations", {})
    if isinstance(annotations, dict):
        annotations[key] = rng.choice(values)
        if key == "stowplan.io/assignment" and isinstance(job.get("spec"), dict):
            job["spec"]["suspend"] = False


def _objects(doc: Any) -> list[dict[str, Any]]:
    """The objects of a fixture: documents, and the items of Lists."""
    out = []
    for d in doc if isinstance(doc, list) else [doc]:
        if isinstance(d, dict):
            out.extend(i for i in d.get("items") or () if isinstance(i, dict)) if isinstance(d.get("items"), list) \
                else out.append(d)
    return out


def _mutate_tree(rng: random.Random, doc: Any, rounds: int) -> None:
    for _ in range(rounds):
        if rng.random() < 0.3:
            _annotate(rng, doc)
            continue
        slots = _slots(doc)
        if not slots:
            return
        parent, key = rng.choice(slots)
        value = parent[key]
        op = rng.choice(["delete", "swap", "number", "string", "duplicate", "empty", "nest", "deep"])
        if op == "delete":
            del parent[key]
        elif op == "swap":
            parent[key] = rng.choice([None, True, False, 0, "", [], {}, 1.5, str(value)[:50], [value], {"x": value}])
        elif op == "number":
            parent[key] = rng.choice(NUMBERS + [str(n) for n in NUMBERS])
        elif op == "string":
            parent[key] = rng.choice(STRANGE)
        elif op == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(value))           # the same object twice
        elif op == "duplicate" and isinstance(value, (dict, list)) and isinstance(parent, dict):
            parent[f"{key}-copy"] = copy.deepcopy(value)
        elif op == "empty":
            parent[key] = type(value)() if isinstance(value, (dict, list, str)) else None
        elif op == "nest":
            parent[key] = {"a": {"b": [value]}}
        elif op == "deep":
            parent[key] = DEEP                 # nesting deeper than a parser's recursion, written in below


def _mutate_text(rng: random.Random, text: str) -> bytes:
    lines = text.split("\n")
    if rng.random() < 0.5:
        return text.encode()                   # half the cases reach the reader's checks, not the parser's
    op = rng.choice(["truncate", "duplicate-line", "delete-line", "swap-lines", "bytes", "unicode"])
    if op == "truncate":
        return text.encode()[: rng.randrange(len(text.encode()) + 1)]
    if op == "duplicate-line" and len(lines) > 1:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])              # in YAML often a key given twice
    elif op == "delete-line" and len(lines) > 1:
        del lines[rng.randrange(len(lines))]
    elif op == "swap-lines" and len(lines) > 2:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "bytes":
        data = bytearray(text.encode())
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.choice([0x00, 0x1B, 0x7F, 0x80, 0xC3, 0xFF, ord("{"), ord(":")])
        return bytes(data)
    elif op == "unicode":
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice(["\u202e", "\ufeff", "\ud800", "名", "\U0001F680", "\x85"]) + text[i:]
        return text.encode("utf-8", "surrogatepass")
    return "\n".join(lines).encode()


def mutated(name: str, seed: int) -> bytes:
    """The bytes of fixture `name` after seed `seed`'s mutations."""
    rng = random.Random(f"{name}:{seed}")
    text = (FIXTURES / name).read_text()
    if name.endswith(".json"):
        doc: Any = json.loads(text)
    else:
        doc = list(yaml.safe_load_all(text))
    _mutate_tree(rng, doc, rng.randint(1, 6))
    if name.endswith(".json") or rng.random() < 0.3:     # JSON takes the reader's other path
        out = json.dumps(doc, separators=(",", ":"), allow_nan=True, ensure_ascii=rng.random() < 0.5)
    else:
        out = yaml.safe_dump_all([d for d in doc], sort_keys=False, allow_unicode=True)
    depth = rng.choice([1_200, 50_000])
    out = out.replace(f'"{DEEP}"', "[" * depth + "]" * depth).replace(DEEP, "[" * depth + "]" * depth)
    return _mutate_text(rng, out)


def _leaves(value: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{where}[{i}]")
    else:
        yield where, value


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang(f"no answer within {HANG} s")


@pytest.fixture
def hang_guard() -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("name, seed", CASES, ids=[f"{n}-{s}" for n, s in CASES])
def test_what_if_survives_a_mutated_fixture(name: str, seed: int, tmp_path: Path, hang_guard: None,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STOWPLAN_DEBUG", raising=False)
    snapshot = tmp_path / name
    snapshot.write_bytes(mutated(name, seed))
    out = tmp_path / "plan.json"
    result = CliRunner().invoke(cli_module.cli, ["what-if", str(snapshot), "--time-limit", TIME_LIMIT, "-o", "json",
                                                 "--out", str(out)], auto_envvar_prefix="STOWPLAN")
    where = f"fixture {name}, seed {seed} (tests/test_fuzz.py: mutated({name!r}, {seed}))"
    assert not isinstance(result.exception, _Hang), f"{where}: hung"
    assert result.exit_code in (0, 2, 3), f"{where}: exit {result.exit_code}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, f"{where}\n{result.stderr}"
    if result.exit_code == 0:
        plan = json.loads(out.read_text())
        assert plan["kind"] == "Plan" and all(math.isfinite(v) for v in plan["solver"]["seconds"].values())
        unknown = [key for key, value in _leaves(plan["summary"]) if value is None]
        assert not unknown, f"{where}: the summary has no value for {unknown}"   # e.g. an overflowed cost
        assert all(e["cost"] is not None for e in plan["evictions"]), where
    else:
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1, f"{where}\n{result.stderr}"
        assert not out.exists()
