"""Property tests of every reader (issue 40): Hypothesis puts hostile values (integers past
int64 and past Python's 4,300 digits, non-finite and out-of-range floats, superscript and
Arabic-Indic digits, lone surrogates, bidi overrides, `$...$`, deep nesting, wrong types,
non-string keys, YAML tags Python cannot build) into every field of every door: the
snapshot's objects and annotations, a policy file, Kueue's Configuration, an --add-nodes
spec, a kubeconfig, a saved plan file and an API server's list pages (a real local HTTP
server). The contract each example must keep: exit 0
with a valid plan, or exit 2 with one `Error:` line naming the file; never exit 1 or a
traceback, never past a generous time and memory bound measured in this process.

The budget is fixed and derandomized in the default run (`make test`); `make fuzz`
runs STOWPLAN_FUZZ_EXAMPLES examples per reader with fresh randomness.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import JsonServer
from planner import cli as cli_module
from planner.base.errors import InputError

REPO = Path(__file__).resolve().parent.parent
TINY = yaml.safe_load((REPO / "fixtures" / "tiny.yaml").read_text())
# every workload kind's adapter, running work with assignments and pods, cohorts, fair sharing
BASES = {name: yaml.safe_load((REPO / "fixtures" / name).read_text())
         for name in ("tiny.yaml", "many-kinds.yaml", "fair-sharing.yaml")}
LONG = int(os.environ.get("STOWPLAN_FUZZ_EXAMPLES", "0"))
EXAMPLES = LONG or 12
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])
HANG = 120            # seconds per example: only to stop a hang (the machine swings 2-4x; a read takes < 1 s)
MEMORY_MIB = 3072     # growth of this process's peak RSS over the whole module: only to catch a blow-up

# ---------------------------------------------------------------- hostile values

# Integers too long for Hypothesis to print (past 4,300 digits) travel as a marker, made
# real only when the document is written
HUGE = [2**63, -(2**63) - 1, 10**30, 10**400, -(10**400), "<int 10**5000>", "<int -10**4400>"]


def _real(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("<int ") and value.endswith(">"):
        base, power = value[5:-1].split("**")
        return (-1 if base.startswith("-") else 1) * 10 ** int(power)
    return value
STRANGE_TEXT = ["", " ", "²", "١٢", "1e400", "-1", "NaN", "inf", "0x10", "1_000", "9" * 5000, "$x^$", "$\\frac{$",
                "\u202egnp.exe", "\x1b]0;t\x07", "a\nb", "\ud800", "\udfff", "名前", "true", "null", "~", "{", "[",
                "2026-13-01", "2026-02-30T25:61:00Z", "1Ei", "9223372036854775808", "500m", "-0", "+1", "0.", ".5"]


def deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from(HUGE),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(STRANGE_TEXT),
    st.text(max_size=30),
)
hostile = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(["1", "~"])), inner,
                                            max_size=3)),
    max_leaves=6,
) | st.sampled_from([deep(200), deep(600), {1: "int key"}, {None: "null key"}, {(1, 2): "tuple key"}])

# raw YAML text for a value: tags Python's constructors refuse, bare dates, huge literals
raw_yaml = st.sampled_from([
    "!!int abc", "!!float abc", "!!bool maybe", "!!timestamp garbage", "2026-13-01", "2026-02-30",
    "!!binary aGk=", "!!set {a}", "!!omap [a: 1]", "!!python/object:os.system x", "9" * 5000, "-" + "9" * 5000,
    "1e400", ".nan", "-.inf", "&a [*a]", "[" * 5000 + "]" * 5000, "*nowhere", "{a: 1, a: 2}", "!!str", "? [a]\n  : b", "0o777", "0x_1",
])

# ---------------------------------------------------------------- writing a document with a value in it


def json_text(document: Any) -> str:
    """JSON of anything Hypothesis made: huge ints written out, non-string keys as Python's
    str (json would refuse a tuple key), lone surrogates escaped (ensure_ascii)."""
    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k if isinstance(k, str) else repr(k): clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return _real(value)

    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.dumps(clean(document), allow_nan=True)
    finally:
        sys.set_int_max_str_digits(old)


MARK = "__stowplan_fuzz_raw__"


def yaml_text(document: Any, raw: str) -> str:
    """YAML with one value replaced by raw text (a tag, a bare date, ...)."""
    text = yaml.safe_dump(document, sort_keys=False, width=10**6)
    return text.replace(MARK, raw.replace("\n", "\n    "), 1)


def slots(document: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) of a tree, in a stable order."""
    out: list[tuple[Any, Any]] = []
    stack = [document]
    while stack:
        node = stack.pop()
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
        for key, value in items:
            out.append((node, key))
            if isinstance(value, (dict, list)):
                stack.append(value)
    return out


# ---------------------------------------------------------------- the contract

_start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError(f"an example ran past {HANG} s")


@pytest.fixture
def bounded() -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - _start_rss) / 1024
    assert grown < MEMORY_MIB, f"peak RSS grew by {grown:.0f} MiB"


def invoke(*args: str) -> Result:
    signal.alarm(HANG)
    try:
        return CliRunner().invoke(cli_module.cli, list(args), auto_envvar_prefix="STOWPLAN")
    finally:
        signal.alarm(0)


def holds(result: Result, file: str, what: str) -> None:
    """Exit 0 with a plan, or exit 2 with one Error line naming `file`; nothing else."""
    where = f"{what}\n--- stderr ---\n{result.stderr[-3000:]}"
    if isinstance(result.exception, TimeoutError):
        raise AssertionError(f"hang: {where}")
    assert result.exit_code in (0, 2), f"exit {result.exit_code}: {where}"
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, where
    if result.exit_code == 0:
        plan = json.loads(result.stdout)
        assert plan["kind"] == "Plan" and isinstance(plan["admissions"], list), where
        return
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, where
    assert os.path.basename(file) in errors[0] or "--" in errors[0], where


def what_if(path: str, *extra: str) -> Result:
    return invoke("what-if", path, "-o", "json", "--solver", "greedy", "--time-limit", "5", *extra)


def put(document: Any, index: int, value: Any) -> tuple[Any, Any]:
    places = slots(document)
    container, key = places[index % len(places)]
    container[key] = value
    return container, key


def hostile_text(base: Any, index: int, value: Any, raw: str | None) -> str:
    """A copy of `base` with its slot `index` (any place in it) made hostile, as text:
    `value` there, written as JSON; or, with `raw`, those YAML bytes there as they are."""
    document = json.loads(json.dumps(base))
    if raw is None:
        put(document, index, value)
        return json_text(document)
    put(document, index, MARK)
    return yaml_text(document, raw)


# ---------------------------------------------------------------- readers

@pytest.mark.parametrize("base", sorted(BASES))
@FUZZ
@given(index=st.integers(min_value=0), value=hostile)
def test_snapshot_fields(tmp_path: Path, bounded: None, base: str, index: int, value: Any) -> None:
    document = json.loads(json.dumps(BASES[base]))
    _, key = put(document, index, value)
    path = tmp_path / "snap.json"
    path.write_text(json_text(document))
    holds(what_if(str(path)), str(path), f"snapshot field {key!r} = {value!r:.200}")


@pytest.mark.parametrize("base", sorted(BASES))
@FUZZ
@given(index=st.integers(min_value=0), raw=raw_yaml)
def test_snapshot_yaml_scalars(tmp_path: Path, bounded: None, base: str, index: int, raw: str) -> None:
    document = json.loads(json.dumps(BASES[base]))
    places = [p for p in slots(document) if not isinstance(p[0][p[1]], (dict, list))]
    container, key = places[index % len(places)]
    container[key] = MARK
    path = tmp_path / "snap.yaml"
    path.write_text(yaml_text(document, raw))
    holds(what_if(str(path)), str(path), f"snapshot field {key!r} = {raw!r:.200}")


ANNOTATION_KEYS = ["stowplan.io/assignment", "stowplan.io/admitted-at", "stowplan.io/checkpointed-at",
                   "stowplan.io/preemption-cost", "stowplan.io/non-preemptible", "kueue.x-k8s.io/job-min-parallelism",
                   "kueue.x-k8s.io/requeue-count", "kueue.x-k8s.io/podset-slice-required-topology-constraints",
                   "kueue.x-k8s.io/podset-slice-size", "kueue.x-k8s.io/podset-required-topology"]
annotation_text = st.one_of(st.sampled_from(STRANGE_TEXT), st.text(max_size=40),
                            hostile.map(lambda v: json_text(v)),
                            st.sampled_from(["[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000,
                                             '[{"name":"main","count":' + "9" * 5000 + "}]",
                                             '[{"topology":"kubernetes.io/hostname","size":' + "9" * 30 + "}]"]))


@FUZZ
@given(key=st.sampled_from(ANNOTATION_KEYS), text=annotation_text, running=st.booleans(),
       job=st.integers(0, 3))
def test_annotations(tmp_path: Path, bounded: None, key: str, text: str, running: bool, job: int) -> None:
    document = json.loads(json.dumps(TINY))
    target = [o for o in document["items"] if o["kind"] == "Job"][job]
    place = target["spec"]["template"] if key.startswith("kueue.x-k8s.io/podset") else target
    place.setdefault("metadata", {}).setdefault("annotations", {})[key] = text
    target["spec"]["suspend"] = not running
    path = tmp_path / "snap.json"
    path.write_text(json_text(document))
    holds(what_if(str(path)), str(path), f"annotation {key} = {text!r:.200}")


POLICY_KEYS = ["timeLimitSeconds", "gap", "agingPerHour", "maxLostHours", "restartCost", "minimumRuntimeSeconds",
               "gpuResources", "threads", "seed", "greedyFloor", "defragment", "maxMigrationsPerCycle",
               "migrationCheckpointWindowSeconds", "kueueConfiguration", "unknownField"]


@FUZZ
@given(values=st.dictionaries(st.sampled_from(POLICY_KEYS), hostile, min_size=1, max_size=3))
def test_policy_file(tmp_path: Path, bounded: None, values: dict[str, Any]) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json_text({"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy",
                                 "metadata": {"name": "p"}, "spec": values}))
    holds(what_if(str(REPO / "fixtures" / "tiny.yaml"), "--policy", str(policy)), str(policy), f"policy {values!r:.300}")


CONFIGURATION = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                 "fairSharing": {"enable": True, "preemptionStrategies": ["LessThanOrEqualToFinalShare"]},
                 "admissionFairSharing": {"usageHalfLifeTime": "168h", "usageSamplingInterval": "5m",
                                          "resourceWeights": {"nvidia.com/gpu": 1}},
                 "waitForPodsReady": {"enable": True, "timeout": "5m", "blockAdmission": False,
                                      "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 3,
                                                            "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600}}}


@FUZZ
@given(index=st.integers(min_value=0), value=hostile, raw=st.one_of(st.none(), raw_yaml))
def test_kueue_configuration(tmp_path: Path, bounded: None, index: int, value: Any, raw: str | None) -> None:
    text = hostile_text(CONFIGURATION, index, value, raw)
    document = json.loads(json.dumps(TINY))
    document["items"].append({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                              "data": {"controller_manager_config.yaml": text}})
    path = tmp_path / "snap.json"
    path.write_text(json_text(document))
    holds(what_if(str(path)), str(path), f"configuration {text[:300]!r}")


SPEC = {"templates": [{"name": "rack", "cost": 10, "per": "rack", "hosts": 4, "topology": ["example.com/rack"],
                       "labels": {"example.com/gpu": "h100"}, "taints": [{"key": "gpu", "value": "true",
                                                                          "effect": "NoSchedule"}],
                       "allocatable": {"nvidia.com/gpu": 8, "cpu": "96", "memory": "1Ti", "pods": 110}, "max": 50}]}


@FUZZ
@given(index=st.integers(min_value=0), value=hostile, raw=st.one_of(st.none(), raw_yaml))
def test_capacity_spec(tmp_path: Path, bounded: None, index: int, value: Any, raw: str | None) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(hostile_text(SPEC, index, value, raw))
    holds(what_if(str(REPO / "fixtures" / "tiny.yaml"), "--add-nodes", str(path)), str(path),
          f"spec {path.read_text()[:300]!r}")


def _direct(read: Callable[[], Any], what: str) -> None:
    """A reader called directly: returns, or raises InputError (exit 2) naming the file."""
    signal.alarm(HANG)
    try:
        read()
    except InputError as error:
        assert error.exit_code == 2 and error.file, f"{what}: {error}"
    finally:
        signal.alarm(0)


KUBECONFIG = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
              "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
              "users": [{"name": "u", "user": {"token": "t"}}]}


@FUZZ
@given(index=st.integers(min_value=0), value=hostile, raw=st.one_of(st.none(), raw_yaml))
def test_kubeconfig(tmp_path: Path, bounded: None, index: int, value: Any, raw: str | None) -> None:
    from planner.cluster.kube import check_kubeconfig_files

    path = tmp_path / "kubeconfig"
    path.write_text(hostile_text(KUBECONFIG, index, value, raw))
    _direct(lambda: check_kubeconfig_files(str(path)), f"kubeconfig {path.read_text()[:300]!r}")


PLAN = (REPO / "fixtures" / "tiny.plan.yaml").read_text()


@FUZZ
@given(index=st.integers(min_value=0), value=hostile)
def test_plan_file(tmp_path: Path, bounded: None, index: int, value: Any) -> None:
    from planner.cluster.planfile import load_plan

    document = yaml.safe_load(PLAN)
    document.setdefault("snapshot", {})["resourceVersions"] = {
        f"Job/ml-research/{n}": "1" for n in ("finetune-llama", "eval-sweep", "pretrain-small", "notebook-export")}
    put(document, index, value)
    path = tmp_path / "plan.json"
    path.write_text(json_text(document))
    _direct(lambda: load_plan(str(path)), f"plan {path.read_text()[:300]!r}")


@pytest.fixture(scope="module")
def api_server() -> Iterator[JsonServer]:
    server = JsonServer()
    yield server
    server.close()


page = st.fixed_dictionaries({"kind": st.one_of(st.just("NodeList"), hostile), "apiVersion": st.one_of(st.just("v1"), hostile)},
                             optional={"items": st.one_of(st.lists(st.one_of(hostile, st.just({"metadata": {"name": "n"}})),
                                                                   max_size=3), hostile),
                                       "metadata": st.one_of(st.fixed_dictionaries({"continue": hostile}), hostile)})


@FUZZ
@given(answer=st.one_of(page, hostile))
def test_api_server_list_pages(api_server: JsonServer, bounded: None, answer: Any) -> None:
    from kubernetes import client

    from planner.cluster.kube import Kube
    from planner.base.errors import ClusterError

    api_server.answer = json_text(answer).encode()
    configuration = client.Configuration()
    configuration.host = api_server.url
    kube = Kube(client.ApiClient(configuration), timeout=10)
    signal.alarm(HANG)
    try:
        items = list(kube.list("/api/v1/nodes"))
    except InputError as error:          # a page of the wrong shape, a repeated token: exit 2
        assert error.exit_code == 2, str(error)
        return
    except ClusterError as error:        # not JSON at all: the cluster's fault, exit 4
        assert error.exit_code == 4, str(error)
        return
    finally:
        signal.alarm(0)
    assert all(isinstance(i, dict) and "kind" in i and "apiVersion" in i for i in items)
