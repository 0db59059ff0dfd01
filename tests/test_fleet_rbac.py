"""The read-only rights of cronjob/multicluster/worker-reader.yaml against what planning a
fleet reads (`plan --worker`, planner.cluster.fleet_live: each cluster read by
planner.cluster.reader): exactly the reader's lists and its one get, no write verb, bound
to the ServiceAccount worker.yaml's dispatch rights are bound to.

What the reader asks for is not copied here: `list_objects` runs against a recorder that
answers every discovery request with every version asked, so each collection the reader
would list on a cluster serving every kind is recorded. The rig's live test
(tests/cluster/test_live_fleet_rbac.py) plans with these rights on a real API server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import yaml

from planner import kinds
from planner.cluster import reader

MULTI = Path(__file__).resolve().parent.parent / "cronjob" / "multicluster"
READER = MULTI / "worker-reader.yaml"
ROLE = "stowplan-plan-worker"
READ_VERBS = {"get", "list"}


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def every_version() -> set[str]:
    """Each API version the reader may ask discovery about (so every kind counts as served)."""
    versions = set(reader.KUEUE_VERSIONS) | {reader.PROVISIONING_VERSION}
    for adapter in kinds.adapters():
        versions.add(adapter.version)
        versions.update(version for _, version, _, _, _ in adapter.needs)
    return versions


class Recorder:
    """Stands in for planner.cluster.kube.Kube only to learn which paths the reader reads."""

    def __init__(self) -> None:
        self.listed: list[str] = []
        self.got: list[str] = []

    def get_or_none(self, path: str) -> Any:
        if path.startswith("/apis/") and path.count("/") == 2:          # discovery: /apis/GROUP
            return {"versions": [{"version": v} for v in sorted(every_version())]}
        self.got.append(path)
        return None

    def list(self, path: str, **_: Any) -> Iterator[dict[str, Any]]:
        self.listed.append(path)
        return iter(())


def resource(path: str) -> tuple[str, str, str, str]:
    """(group, resource, namespace, name) of /api/v1/... or /apis/GROUP/VERSION/... paths."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    return group, rest[0], namespace, rest[1] if len(rest) > 1 else ""


def reads() -> tuple[set[tuple[str, str]], set[tuple[str, str, str, str]]]:
    """(group, resource) the reader lists across all namespaces; (group, resource, namespace, name) it gets."""
    kinds.use_custom(())
    recorder = Recorder()
    reader.list_objects(recorder)   # type: ignore[arg-type]
    listed = {resource(p)[:2] for p in recorder.listed}
    assert all(not resource(p)[2] for p in recorder.listed), recorder.listed   # every list is cluster-wide
    return listed, {resource(p) for p in recorder.got}


def role_rules(docs: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    rules: list[dict[str, Any]] = found[0]["rules"]
    return rules


def granted(rules: list[dict[str, Any]], verb: str) -> set[tuple[str, str]]:
    return {(group, res) for rule in rules if verb in rule["verbs"] and not rule.get("resourceNames")
            for group in rule["apiGroups"] for res in rule["resources"]}


def binding_to(docs: list[dict[str, Any]], kind: str, role_kind: str, role: str) -> list[dict[str, Any]]:
    found = [d for d in docs if d["kind"] == kind and d["roleRef"]["name"] == role]
    assert len(found) == 1, (kind, role)
    assert found[0]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}
    subjects: list[dict[str, Any]] = found[0]["subjects"]
    return subjects


def test_the_reader_reads_what_the_test_derives_from_it():
    """The recorder sees the reader's every kind: the core kinds, Kueue's, each workload kind
    and what it needs, pods, ProvisioningRequests; and the one get of Kueue's Configuration."""
    listed, got = reads()
    assert {("", "pods"), ("batch", "jobs"), (reader.PROVISIONING_GROUP, "provisioningrequests")} <= listed
    assert {(reader.KUEUE_GROUP, plural) for plural in reader.KUEUE_PLURALS} <= listed
    assert {(a.group, a.plural) for a in kinds.ADAPTERS} <= listed
    assert {(group, plural) for a in kinds.ADAPTERS for group, _, _, plural, _ in a.needs} <= listed
    assert got == {("", "configmaps", reader.KUEUE_CONFIG_NAMESPACE, reader.KUEUE_CONFIG_NAME)}


def test_worker_reader_grants_exactly_the_lists_planning_makes():
    """Every collection the reader lists is granted `list`, and nothing else is granted at
    all: no verb but get/list, no resource the reader does not read."""
    docs = documents(READER)
    rules = role_rules(docs, "ClusterRole", ROLE)
    listed, _ = reads()
    assert granted(rules, "list") == listed
    assert {verb for rule in rules for verb in rule["verbs"]} == {"list"}    # the reader never gets nor watches these
    assert all(not rule.get("resourceNames") for rule in rules)


def test_worker_reader_gets_kueue_configuration_by_name_only():
    docs = documents(READER)
    _, got = reads()
    roles = [d for d in docs if d["kind"] == "Role"]
    assert len(roles) == 1
    ((group, res, namespace, name),) = got
    assert roles[0]["metadata"]["namespace"] == namespace
    assert roles[0]["rules"] == [{"apiGroups": [group], "resources": [res], "resourceNames": [name], "verbs": ["get"]}]


def test_worker_reader_has_no_write_verb_anywhere():
    docs = documents(READER)
    verbs = {verb for d in docs if d["kind"] in ("ClusterRole", "Role") for rule in d["rules"] for verb in rule["verbs"]}
    assert verbs and verbs <= READ_VERBS
    assert {d["kind"] for d in docs} <= {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                          "RoleBinding"}


def test_worker_reader_binds_the_dispatch_service_account():
    """Both roles go to the ServiceAccount worker.yaml's dispatch rights go to (the identity
    of the kubeconfig the manager uses for a worker), which the file also declares."""
    docs = documents(READER)
    dispatch = binding_to(documents(MULTI / "worker.yaml"), "ClusterRoleBinding", "ClusterRole",
                          "stowplan-dispatch-worker")
    assert len(dispatch) == 1 and dispatch[0]["kind"] == "ServiceAccount"
    role = next(d for d in docs if d["kind"] == "Role")
    assert binding_to(docs, "ClusterRoleBinding", "ClusterRole", ROLE) == dispatch
    assert binding_to(docs, "RoleBinding", "Role", role["metadata"]["name"]) == dispatch
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    assert bindings[0]["metadata"]["namespace"] == role["metadata"]["namespace"]
    accounts = [d["metadata"] for d in docs if d["kind"] == "ServiceAccount"]
    assert [{"name": a["name"], "namespace": a["namespace"]} for a in accounts] == \
        [{"name": dispatch[0]["name"], "namespace": dispatch[0]["namespace"]}]


def test_manager_rights_cover_what_multikueue_config_reads_there():
    """On the manager, --multikueue-config gets the MultiKueueConfig, its MultiKueueClusters
    and their Secrets by name (planner.cluster.multikueue): manager.yaml grants those gets
    to the same ServiceAccount; the snapshot's reads come from worker-reader.yaml there too."""
    docs = documents(MULTI / "manager.yaml")
    rules = role_rules(docs, "ClusterRole", "stowplan-dispatch-manager")
    assert {("kueue.x-k8s.io", "multikueueconfigs"), ("kueue.x-k8s.io", "multikueueclusters")} <= granted(rules, "get")
    secrets = role_rules(docs, "Role", "stowplan-dispatch-worker-kubeconfigs")
    assert all(rule["resources"] == ["secrets"] and rule["verbs"] == ["get"] and rule["resourceNames"]
               for rule in secrets)
    subject = binding_to(documents(READER), "ClusterRoleBinding", "ClusterRole", ROLE)
    assert binding_to(docs, "ClusterRoleBinding", "ClusterRole", "stowplan-dispatch-manager") == subject
    assert binding_to(docs, "RoleBinding", "Role", "stowplan-dispatch-worker-kubeconfigs") == subject
