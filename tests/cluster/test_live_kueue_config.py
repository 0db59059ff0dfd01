"""Kueue's Configuration read live (issue 25, item 1): the planner's ServiceAccount gets
ConfigMap kueue-system/kueue-manager-config and nothing else of kueue-system, and a
live read turns its `fairSharing` into the snapshot's configuration."""

from __future__ import annotations

import pytest
import yaml

from models import FairSharingConfig, KueueConfig
from planner.cluster import Kube, connect
from planner.cluster.kube import ApiStatus, MERGE_PATCH, path_of
from planner.cluster.reader import read_cluster
from test_live_cronjob import installed, sa_kubeconfig  # noqa: F401  (fixture)

CONFIG = path_of("v1", "configmaps", "kueue-system", "kueue-manager-config")
OTHER = path_of("v1", "configmaps", "kueue-system", "kueue-other")


def config_map(name, configuration):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": yaml.safe_dump(configuration)}}


def test_the_service_account_reads_kueues_configuration_and_nothing_else(installed, control_plane,  # noqa: F811
                                                                          tmp_path):
    configuration = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                     "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]},
                     "waitForPodsReady": {"timeout": "7m"}}
    sa = Kube(connect(str(sa_kubeconfig(control_plane, installed, tmp_path))))
    collection = path_of("v1", "configmaps", "kueue-system")
    try:
        for path in (CONFIG, OTHER):
            if installed.get_or_none(path) is not None:
                installed.request("DELETE", path)
        # no ConfigMap yet: Kueue's defaults
        assert read_cluster(sa).snapshot.kueue_config == KueueConfig()
        installed.request("POST", collection, body=config_map("kueue-manager-config", configuration))
        installed.request("POST", collection, body=config_map("kueue-other", configuration))
        live = read_cluster(sa)
        config = live.snapshot.kueue_config
        assert config.fair_sharing == FairSharingConfig(True, ("LessThanInitialShare",))
        assert config.wait_for_pods_ready.enabled and config.wait_for_pods_ready.timeout_seconds == 420
        assert config.source == "ConfigMap kueue-system/kueue-manager-config"
        # the List a snapshot file keeps carries it, so what-if plans the same configuration
        kept = [o for o in live.document["items"] if o.get("kind") == "ConfigMap"]
        assert [o["metadata"]["name"] for o in kept] == ["kueue-manager-config"]
        # get on that one name, and nothing more
        for method, path, body in [("GET", OTHER, None), ("GET", collection, None),
                                   ("PATCH", CONFIG, {"data": {"x": "y"}}), ("DELETE", CONFIG, None),
                                   ("GET", path_of("v1", "secrets", "kueue-system"), None)]:
            with pytest.raises(ApiStatus) as denied:
                sa.request(method, path, body=body, content_type=MERGE_PATCH if method == "PATCH" else "application/json")
            assert denied.value.status == 403, (method, path)
    finally:
        for path in (CONFIG, OTHER):
            if installed.get_or_none(path) is not None:
                installed.request("DELETE", path)
