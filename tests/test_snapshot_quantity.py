"""Quantities and effective pod requests, as Kubernetes computes them."""

from __future__ import annotations

import pytest

from models import Resources
from planner.k8s.fields import Bad
from planner.k8s.quantity import QuantityError, parse_quantity
from planner.k8s.requests import effective_request

GI = 2**30


@pytest.mark.parametrize("text, resource, expected", [
    ("500m", "cpu", 500),
    ("2", "cpu", 2000),
    ("0.5", "cpu", 500),
    ("1.5", "cpu", 1500),
    ("0.0001", "cpu", 1),          # MilliValue rounds up
    ("100u", "cpu", 1),
    ("1e3", "cpu", 1_000_000),
    ("1E3", "cpu", 1_000_000),
    ("1e-3", "cpu", 1),
    ("100k", "cpu", 100_000_000),
    ("64Gi", "memory", 64 * GI),
    ("1.5Gi", "memory", 3 * GI // 2),
    ("1Ki", "memory", 1024),
    ("1Ei", "memory", 2**60),
    ("100k", "memory", 100_000),
    ("1M", "memory", 10**6),
    ("2G", "memory", 2 * 10**9),
    ("1T", "ephemeral-storage", 10**12),
    ("1P", "x", 10**15),
    ("1E", "x", 10**18),
    ("1e3", "memory", 1000),
    ("0.5", "nvidia.com/gpu", 1),  # Value() rounds up
    ("500m", "memory", 1),
    ("8", "nvidia.com/gpu", 8),
    ("+8", "nvidia.com/gpu", 8),
    (".5", "cpu", 500),
    ("1.", "cpu", 1000),
    ("0", "memory", 0),
    ("-0", "memory", 0),
    (8, "nvidia.com/gpu", 8),      # YAML's bare numbers
    (2, "cpu", 2000),
    (0.5, "cpu", 500),
    (0.1, "cpu", 100),             # the number as written, not the binary float
])
def test_quantity_table(text, resource, expected):
    assert parse_quantity(text, resource) == expected


@pytest.mark.parametrize("text, message", [
    ("-1", "negative"),
    ("-500m", "negative"),
    (-2, "negative"),
    (-0.5, "negative"),
    ("abc", "not a quantity"),
    ("", "not a quantity"),
    ("1.2.3", "not a quantity"),
    ("5 Gi", "not a quantity"),
    ("5gi", "not a quantity"),
    ("1Gi3", "not a quantity"),
    ("e3", "not a quantity"),
    ("1e", "not a quantity"),
    ("1e400", "out of range"),
    (True, "not a quantity"),
    (None, "not a quantity"),
    ([1], "not a quantity"),
    (float("nan"), "not a quantity"),
    ("99999999999E", "too large"),
])
def test_quantity_rejects(text, message):
    with pytest.raises(QuantityError, match=message):
        parse_quantity(text, "memory")


def container(name="c", requests=None, limits=None, restart=None):
    c = {"name": name, "resources": {}}
    if requests is not None:
        c["resources"]["requests"] = requests
    if limits is not None:
        c["resources"]["limits"] = limits
    if restart:
        c["restartPolicy"] = restart
    return c


def test_request_sums_containers_and_adds_a_pod():
    spec = {"containers": [container(requests={"cpu": "1", "memory": "1Gi"}),
                           container(requests={"cpu": "500m"})]}
    assert effective_request(spec) == Resources.of(cpu=1500, memory=GI, pods=1)


def test_request_falls_back_to_limits():
    spec = {"containers": [container(requests={"cpu": "1"}, limits={"cpu": "4", "nvidia.com/gpu": "2"})]}
    assert effective_request(spec) == Resources.of({"cpu": 1000, "nvidia.com/gpu": 2, "pods": 1})


def test_request_limits_only():
    spec = {"containers": [container(limits={"cpu": "2", "memory": "2Gi"})]}
    assert effective_request(spec) == Resources.of(cpu=2000, memory=2 * GI, pods=1)


def test_init_container_larger_than_app_wins_per_resource():
    spec = {"initContainers": [container(requests={"cpu": "4", "memory": "1Gi"})],
            "containers": [container(requests={"cpu": "1", "memory": "8Gi"})]}
    assert effective_request(spec) == Resources.of(cpu=4000, memory=8 * GI, pods=1)


def test_sidecars_add_to_app_and_to_later_init_containers():
    spec = {
        "initContainers": [
            container("side", requests={"cpu": "1"}, restart="Always"),
            container("init", requests={"cpu": "4"}),     # runs beside the sidecar: 5
            container("side2", requests={"cpu": "500m"}, restart="Always"),
        ],
        "containers": [container(requests={"cpu": "2"})],  # 2 + 1 + 0.5 = 3.5
    }
    assert effective_request(spec).get("cpu") == 5000
    spec["initContainers"][1]["resources"]["requests"]["cpu"] = "2"   # 2 + 1 = 3 < 3.5
    assert effective_request(spec).get("cpu") == 3500


def test_sidecar_declared_after_init_does_not_count_for_it():
    spec = {"initContainers": [container("init", requests={"cpu": "4"}),
                               container("side", requests={"cpu": "1"}, restart="Always")],
            "containers": [container(requests={"cpu": "1"})]}
    assert effective_request(spec).get("cpu") == 4000


def test_overhead_is_added():
    spec = {"containers": [container(requests={"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "120Mi"}}
    assert effective_request(spec) == Resources.of(cpu=1250, memory=120 * 2**20, pods=1)


def test_empty_pod_still_takes_a_pod_slot():
    assert effective_request({"containers": [{"name": "c"}]}) == Resources.of(pods=1)


def test_bad_request_names_the_field():
    spec = {"containers": [container(requests={"cpu": "1"}), container(requests={"memory": "lots"})]}
    with pytest.raises(Bad) as err:
        effective_request(spec, "spec.template.spec")
    assert err.value.field == "spec.template.spec.containers[1].resources.requests.memory"
    assert "lots" in err.value.message


def test_negative_limit_names_the_field():
    spec = {"initContainers": [container(limits={"cpu": "-1"})], "containers": []}
    with pytest.raises(Bad) as err:
        effective_request(spec)
    assert err.value.field == "spec.initContainers[0].resources.limits.cpu"


# ---------------------------------------------------------------- against the official client

from decimal import Decimal  # noqa: E402

from hypothesis import given, settings, strategies as st  # noqa: E402

kubernetes_utils = pytest.importorskip("kubernetes.utils")

_SUFFIXES = ["", "m", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti", "Pi", "e3", "E2", "e-2", "e0"]


@settings(max_examples=300, deadline=None)
@given(whole=st.integers(min_value=0, max_value=10**6), frac=st.one_of(st.none(), st.integers(0, 999)),
       suffix=st.sampled_from(_SUFFIXES), resource=st.sampled_from(["cpu", "memory"]))
def test_agrees_with_kubernetes_client(whole, frac, suffix, resource):
    text = f"{whole}.{frac:03d}{suffix}" if frac is not None else f"{whole}{suffix}"
    exact = Decimal(kubernetes_utils.parse_quantity(text))
    expected = exact * 1000 if resource == "cpu" else exact
    expected_int = int(expected.to_integral_value(rounding="ROUND_CEILING"))
    if expected_int > 2**63 - 1:            # beyond int64, as Kubernetes stores it: rejected
        with pytest.raises(QuantityError, match="too large"):
            parse_quantity(text, resource)
    else:
        assert parse_quantity(text, resource) == expected_int


@pytest.mark.parametrize("value, resource", [(2**63, "memory"), (2**60, "cpu"), (10**30, "nvidia.com/gpu")])
def test_bare_integers_beyond_int64_are_refused_as_text_is(value, resource):
    # a YAML bare integer went through unbounded: 2**63 in a quota overflowed numpy's int64 (exit 1)
    with pytest.raises(QuantityError, match="too large"):
        parse_quantity(value, resource)
