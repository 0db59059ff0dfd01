"""Kueue's Configuration (ConfigMap kueue-system/kueue-manager-config), the PlannerPolicy's
overrides and `fairSharing.weight`: Kueue v0.17's names and defaults, and bad values as
errors naming file, object and field."""

from __future__ import annotations

import pytest
import yaml

from models import (
    AdmissionFairSharingConfig, FairSharingConfig, KueueConfig, ObjectRef, RequeuingStrategy,
    WaitForPodsReadyConfig,
)
from planner.base.errors import InputError
from planner.k8s.fields import Bad
from planner.snapshot.kueue_config import parse_duration, parse_weight
from tests.test_snapshot import base, cluster_queue, kueue, read

CONFIG_MAP = ObjectRef("ConfigMap", "kueue-system", "kueue-manager-config")
FIELD = "data[controller_manager_config.yaml]"


def config_map(configuration, *, name="kueue-manager-config", namespace="kueue-system", raw=None):
    text = raw if raw is not None else yaml.safe_dump(configuration, sort_keys=False)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {"controller_manager_config.yaml": text}}


def configuration(version="v1beta2", **sections):
    return {"apiVersion": f"config.kueue.x-k8s.io/{version}", "kind": "Configuration",
            "namespace": "kueue-system", "integrations": {"frameworks": ["batch/job"]}, **sections}


def policy(**kueue_configuration):
    return {"apiVersion": "stowplan.io/v1alpha1", "kind": "PlannerPolicy", "metadata": {"name": "p"},
            "spec": {"kueueConfiguration": kueue_configuration}}


def bad_config(tmp_path, objects):
    with pytest.raises(InputError) as err:
        read(tmp_path, base() + objects)
    return err.value


# ---------------------------------------------------------------- defaults and reading

def test_without_a_configuration_everything_is_off(tmp_path):
    snap = read(tmp_path, base())
    assert snap.kueue_config == KueueConfig()
    assert not snap.kueue_config.fair_sharing.enabled and not snap.kueue_config.wait_for_pods_ready.enabled
    assert snap.kueue_config.admission_fair_sharing is None


def test_v1beta2_sections_present_are_on_with_kueue_defaults(tmp_path):
    cm = config_map(configuration(fairSharing={"preemptionStrategies": ["LessThanInitialShare"]},
                                  admissionFairSharing={"usageHalfLifeTime": "168h"},
                                  waitForPodsReady={"timeout": "10m"}))
    snap = read(tmp_path, base() + [cm])
    config = snap.kueue_config
    assert config.fair_sharing == FairSharingConfig(True, ("LessThanInitialShare",))
    # usageSamplingInterval defaults to 5 min, weights to 1
    assert config.admission_fair_sharing == AdmissionFairSharingConfig(168 * 3600.0, 300.0, {})
    assert config.admission_fair_sharing.weight("nvidia.com/gpu") == 1.0
    # v1beta2: blockAdmission false, recoveryTimeout = timeout, requeuing Eviction / 60 s / 3600 s, no limit
    ready = config.wait_for_pods_ready
    assert ready == WaitForPodsReadyConfig(True, 600.0, False, RequeuingStrategy("Eviction", None, 60, 3600), None)
    assert ready.recovery_timeout == 600.0
    assert config.source == "ConfigMap kueue-system/kueue-manager-config"


def test_every_field_read(tmp_path):
    cm = config_map(configuration(
        fairSharing={"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        admissionFairSharing={"usageHalfLifeTime": "1h30m", "usageSamplingInterval": "30s",
                              "resourceWeights": {"nvidia.com/gpu": 10, "cpu": 0.5}},
        waitForPodsReady={"timeout": "300s", "blockAdmission": True, "recoveryTimeout": "0s",
                          "requeuingStrategy": {"timestamp": "Creation", "backoffLimitCount": 5,
                                                "backoffBaseSeconds": 10, "backoffMaxSeconds": 600}}))
    config = read(tmp_path, base() + [cm]).kueue_config
    assert config.fair_sharing.preemption_strategies == ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
    afs = config.admission_fair_sharing
    assert afs is not None and afs.usage_half_life_seconds == 5400.0 and afs.usage_sampling_interval_seconds == 30.0
    assert dict(afs.resource_weights) == {"cpu": 0.5, "nvidia.com/gpu": 10.0}
    ready = config.wait_for_pods_ready
    assert ready.block_admission and ready.recovery_timeout == 0.0
    assert ready.requeuing_strategy == RequeuingStrategy("Creation", 5, 10, 600)


def test_v1beta1_enable_and_its_defaults(tmp_path):
    # v1beta1: enable; an empty strategy list is Kueue's default pair; waitForPodsReady's
    # timeout defaults to 5 min and blockAdmission to true (its conversion to v1beta2)
    cm = config_map(configuration("v1beta1", fairSharing={"enable": True},
                                  waitForPodsReady={"enable": True}))
    config = read(tmp_path, base() + [cm]).kueue_config
    assert config.fair_sharing == FairSharingConfig(True, ("LessThanOrEqualToFinalShare", "LessThanInitialShare"))
    assert config.wait_for_pods_ready.enabled and config.wait_for_pods_ready.timeout_seconds == 300.0
    assert config.wait_for_pods_ready.block_admission
    off = config_map(configuration("v1beta1", fairSharing={"enable": False, "preemptionStrategies": []},
                                   waitForPodsReady={"enable": False}))
    assert read(tmp_path, base() + [off]).kueue_config == KueueConfig(source="ConfigMap kueue-system/kueue-manager-config")


def test_other_config_maps_are_ignored_and_counted(tmp_path):
    other = config_map(configuration(fairSharing={"preemptionStrategies": ["LessThanInitialShare"]}),
                       name="kueue-manager-config", namespace="elsewhere")
    snap = read(tmp_path, base() + [other, config_map(None, name="x", namespace="kueue-system", raw="junk: [")])
    assert snap.kueue_config == KueueConfig()
    assert snap.ignored_kinds["v1/ConfigMap"] == 2


def test_a_config_map_without_the_key_is_a_problem_and_kueue_defaults(tmp_path):
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"}, "data": {}}
    snap = read(tmp_path, base() + [cm])
    assert snap.kueue_config == KueueConfig()
    (problem,) = [p for p in snap.problems if p.ref == CONFIG_MAP]
    assert problem.field == FIELD and "missing" in problem.message


# ---------------------------------------------------------------- bad values: file, ConfigMap, field

@pytest.mark.parametrize("sections, field, words", [
    ({"fairSharing": {"enable": True}}, "fairSharing.enable", "no enable"),
    ({"fairSharing": {}}, "fairSharing.preemptionStrategies", "must be specified"),
    ({"fairSharing": {"preemptionStrategies": ["LessThanInitialShare", "LessThanOrEqualToFinalShare"]}},
     "fairSharing.preemptionStrategies", "not supported"),
    ({"fairSharing": {"preemptionStrategies": ["Whatever"]}}, "fairSharing.preemptionStrategies", "not supported"),
    ({"waitForPodsReady": {"blockAdmission": True}}, "waitForPodsReady.timeout", "must be specified"),
    ({"waitForPodsReady": {"timeout": "-5m"}}, "waitForPodsReady.timeout", "negative"),
    ({"waitForPodsReady": {"timeout": 300}}, "waitForPodsReady.timeout", "duration string"),
    ({"waitForPodsReady": {"timeout": "5 minutes"}}, "waitForPodsReady.timeout", "not a duration"),
    ({"waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"timestamp": "Now"}}},
     "waitForPodsReady.requeuingStrategy.timestamp", "Eviction or Creation"),
    ({"waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"backoffLimitCount": -1}}},
     "waitForPodsReady.requeuingStrategy.backoffLimitCount", "at least 0"),
    ({"waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"backoffBaseSeconds": "60"}}},
     "waitForPodsReady.requeuingStrategy.backoffBaseSeconds", "integer"),
    ({"admissionFairSharing": {"usageHalfLifeTime": "1h", "usageSamplingInterval": "0s"}},
     "admissionFairSharing.usageSamplingInterval", "greater than 0"),
    ({"admissionFairSharing": {"usageHalfLifeTime": "1h", "resourceWeights": {"cpu": -1}}},
     "admissionFairSharing.resourceWeights[cpu]", "at least 0"),
    ({"admissionFairSharing": {"usageHalfLife": "1h"}}, "admissionFairSharing.usageHalfLife", "unknown field"),
])
def test_bad_configuration_names_file_config_map_and_field(tmp_path, sections, field, words):
    err = bad_config(tmp_path, [config_map(configuration(**sections))])
    assert err.file.endswith("snap.yaml") and err.ref == CONFIG_MAP
    assert err.field == f"{FIELD}.{field}", err
    assert words in err.detail, err.detail
    assert err.exit_code == 2


def test_unreadable_configuration(tmp_path):
    err = bad_config(tmp_path, [config_map(None, raw="fairSharing: [")])
    assert err.ref == CONFIG_MAP and err.field == FIELD and "not valid YAML" in err.detail
    err = bad_config(tmp_path, [config_map({"apiVersion": "config.kueue.x-k8s.io/v1alpha9", "kind": "Configuration"})])
    assert err.field == f"{FIELD}.apiVersion" and "v1beta2" in err.detail


# ---------------------------------------------------------------- the policy sets or overrides

def test_policy_turns_fair_sharing_on_without_a_config_map(tmp_path):
    snap = read(tmp_path, base() + [policy(fairSharing={})])
    assert snap.kueue_config.fair_sharing == FairSharingConfig(
        True, ("LessThanOrEqualToFinalShare", "LessThanInitialShare"))
    assert snap.kueue_config.source == "PlannerPolicy"


def test_policy_overrides_sections_of_the_config_map(tmp_path):
    cm = config_map(configuration(fairSharing={"preemptionStrategies": ["LessThanInitialShare"]},
                                  admissionFairSharing={"usageHalfLifeTime": "1h"},
                                  waitForPodsReady={"timeout": "10m"}))
    pol = policy(fairSharing={"enable": False}, admissionFairSharing={"enable": False})
    config = read(tmp_path, base() + [cm, pol]).kueue_config
    assert not config.fair_sharing.enabled and config.admission_fair_sharing is None
    assert config.wait_for_pods_ready.timeout_seconds == 600.0          # not overridden: as read
    assert config.source == "ConfigMap kueue-system/kueue-manager-config + PlannerPolicy"
    pol = policy(fairSharing={"preemptionStrategies": ["LessThanOrEqualToFinalShare"]},
                 waitForPodsReady={"timeout": "1m", "blockAdmission": True})
    config = read(tmp_path, base() + [cm, pol]).kueue_config
    assert config.fair_sharing.preemption_strategies == ("LessThanOrEqualToFinalShare",)
    assert config.wait_for_pods_ready.timeout_seconds == 60.0 and config.wait_for_pods_ready.block_admission
    assert config.admission_fair_sharing is not None and config.admission_fair_sharing.usage_half_life_seconds == 3600


def test_bad_policy_section_names_the_policy_field(tmp_path):
    with pytest.raises(InputError) as err:
        read(tmp_path, base() + [policy(fairSharing={"preemptionStrategies": ["Nope"]})])
    assert err.value.ref == ObjectRef("PlannerPolicy", "", "p")
    assert err.value.field == "spec.kueueConfiguration.fairSharing.preemptionStrategies"
    with pytest.raises(InputError) as err:
        read(tmp_path, base() + [policy(integrations={})])
    assert err.value.field == "spec.kueueConfiguration.integrations" and "unknown field" in err.value.detail


# ---------------------------------------------------------------- fairSharing.weight

def test_weights_on_cluster_queues_cohorts_and_local_queues(tmp_path):
    objects = [kueue("ResourceFlavor", "default", {}),
               kueue("Cohort", "org", {"fairSharing": {"weight": "500m"}}),
               kueue("Cohort", "team", {"parentName": "org"}),
               cluster_queue("a", cohort="team", fairSharing={"weight": 2},
                             admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"}),
               cluster_queue("b", cohort="team", fairSharing={"weight": "0"}),
               cluster_queue("c", cohort="team"),
               kueue("LocalQueue", "lq", {"clusterQueue": "a", "fairSharing": {"weight": "3"}}, namespace="team-a")]
    snap = read(tmp_path, objects)
    assert snap.cohorts["org"].fair_weight == 0.5 and snap.cohorts["team"].fair_weight == 1.0
    assert [snap.cluster_queues[n].fair_weight for n in "abc"] == [2.0, 0.0, 1.0]
    assert snap.cluster_queues["a"].admission_mode == "UsageBasedAdmissionFairSharing"
    assert snap.cluster_queues["c"].admission_mode is None
    assert snap.local_queues[("team-a", "lq")].fair_weight == 3.0


@pytest.mark.parametrize("weight, words", [("-1", "negative"), ("1n", "too small"), ("lots", "not a quantity"),
                                           (True, "quantity")])
def test_a_bad_weight_makes_the_queue_inactive_naming_the_field(tmp_path, weight, words):
    snap = read(tmp_path, base()[:1] + [cluster_queue(fairSharing={"weight": weight})] + base()[2:])
    (problem,) = [p for p in snap.problems if p.ref == ObjectRef("ClusterQueue", "", "cq")]
    assert problem.field == "spec.fairSharing.weight" and words in problem.message
    assert not snap.cluster_queues["cq"].active


def test_durations_and_weights_parse_as_go_and_kubernetes_do():
    assert parse_duration("1h30m", "f") == 5400 and parse_duration("1.5s", "f") == 1.5
    assert parse_duration("0", "f") == 0 and parse_duration("250ms", "f") == 0.25
    for bad in ("", "5", "m", "1d", "-1s"):
        with pytest.raises(Bad):
            parse_duration(bad, "f")
    assert parse_weight("2", "f") == 2 and parse_weight(0, "f") == 0 and parse_weight("100m", "f") == 0.1
    assert parse_weight(1.5, "f") == 1.5
