"""Multi-cluster apply (planner.cluster.dispatch) on TWO real control planes: the session's
plane is the manager, a second one (its own etcd, kube-apiserver, controller-manager,
scheduler and KWOK, started once for this module) is the worker `east`.

Every apply in the first test runs through the CLI with only the rights of
cronjob/multicluster/ (a TokenRequest token for each side's ServiceAccount, in a
kubeconfig of its own), so the least-privilege roles are tested by doing the work.
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import rig
from live_kit import GPU, KUEUE, Env, wait_for
from models import Admission, Eviction, ObjectRef, Plan, PodSetAssignment, SolverReport
from planner.cli import cli
from planner.cluster import Kube, connect
from planner.cluster.apply import DISPATCHED_TO, DISPATCHING_TO, WORKER_STATUS, fingerprint
from planner.cluster.dispatch import ORIGIN_LABEL, ORIGIN_UID, Dispatcher
from planner.cluster.kube import ApiStatus, path_of
from planner.cluster.planfile import load_plan_with_fingerprints, render_saved, touched

MULTI = Path(__file__).resolve().parents[2] / "cronjob" / "multicluster"
PLURALS = {"Secret": "secrets", "MultiKueueCluster": "multikueueclusters", "MultiKueueConfig": "multikueueconfigs",
           "Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
           "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
           "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
           "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}
SA = ("stowplan-system", "stowplan-dispatch")
LEASE = ["--namespace", "stowplan-system", "--lease-name", "stowplan-dispatch-test"]


def install(kube: Kube, file: Path, docs: list[dict[str, Any]] | None = None) -> None:
    for doc in docs if docs is not None else yaml.safe_load_all(file.read_text()):
        meta = doc["metadata"]
        try:
            kube.request("POST", path_of(doc["apiVersion"], PLURALS[doc["kind"]], meta.get("namespace", "")), body=doc)
        except ApiStatus as err:
            if err.status != 409:
                raise


def token_kubeconfig(plane: Any, kube: Kube, path: Path) -> Path:
    """A kubeconfig for the plane with only the dispatch ServiceAccount's token."""
    answer = kube.request("POST", path_of("v1", "serviceaccounts", SA[0], SA[1]) + "/token",
                          body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": 3600}})
    config = yaml.safe_load(plane.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": answer["status"]["token"]}
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def planes(control_plane, tmp_path_factory):
    """(manager, worker) planes, admin Kubes and least-privilege kubeconfigs for both."""
    worker = rig.ControlPlane(manifest=rig.build())
    worker.start()
    try:
        admin_m = Kube(connect(str(control_plane.kubeconfig)))
        admin_w = Kube(connect(str(worker.kubeconfig)))
        install(admin_m, Path("-"), docs=[{"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "kueue-system"}}])
        install(admin_m, MULTI / "manager.yaml")
        install(admin_w, MULTI / "worker.yaml")
        tmp = tmp_path_factory.mktemp("dispatch")
        w_kc = token_kubeconfig(worker, admin_w, tmp / "worker.kubeconfig")
        # MultiKueue's way of naming the worker: a Secret with its kubeconfig, a MultiKueueCluster, a MultiKueueConfig
        install(admin_m, Path("-"), docs=[
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "east-kubeconfig", "namespace": "kueue-system"},
             "data": {"kubeconfig": base64.b64encode(w_kc.read_bytes()).decode()}},
            {"apiVersion": KUEUE, "kind": "MultiKueueCluster", "metadata": {"name": "east"},
             "spec": {"clusterSource": {"kubeConfig": {"location": "east-kubeconfig", "locationType": "Secret"}}}},
            {"apiVersion": KUEUE, "kind": "MultiKueueConfig", "metadata": {"name": "stowplan-test"},
             "spec": {"clusters": ["east"]}}])
        yield {"manager": control_plane, "worker": worker, "m": admin_m, "w": admin_w,
               "m_kc": token_kubeconfig(control_plane, admin_m, tmp / "manager.kubeconfig"), "w_kc": w_kc}
    finally:
        worker.stop()


def world(planes: Any, api_client: Any, namespace: str) -> Env:
    """The same namespace on the worker, with its nodes, flavor, ClusterQueue and LocalQueue `lq`."""
    planes["w"].request("POST", path_of("v1", "namespaces"), body={"metadata": {"name": namespace}})
    return Env(planes["worker"], planes["worker"].api_client(), namespace, nodes=2, gpus=8)


def manager_job(kube: Kube, namespace: str, name: str, pods: int, managed_by: str | None = None,
                gpus: int = 1) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "suspend": True, "parallelism": pods, "completions": pods, "backoffLimit": 0,
        "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                              "containers": [{"name": "train", "image": "registry.invalid/trainer:1",
                                              "resources": {"requests": {GPU: str(gpus), "cpu": "1"},
                                                            "limits": {GPU: str(gpus)}}}]}}}
    if managed_by:
        spec["managedBy"] = managed_by
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": spec}
    created: dict[str, Any] = kube.request("POST", path_of("batch/v1", "jobs", namespace), body=body)
    return created


def plan_file(path: Path, kube: Kube, env: Env, placed: dict[str, str], evicted: tuple[str, ...] = ()) -> str:
    """A saved multi-cluster plan: each Job of `placed` on its node of worker `east` (one pod set `main`)."""
    admissions, versions, prints = [], {}, {}
    for name, node in placed.items():
        job = kube.get(path_of("batch/v1", "jobs", env.namespace, name))
        ref = ObjectRef("Job", env.namespace, name)
        pods = job["spec"]["parallelism"]
        admissions.append(Admission(ref, "cq", (PodSetAssignment(
            "main", pods, {GPU: env.flavor, "cpu": env.flavor}, ("kubernetes.io/hostname",), (((node,), pods),)),),
            cluster="east"))
        versions[ref], prints[ref] = job["metadata"]["resourceVersion"], fingerprint(job)
    evictions = []
    for name in evicted:
        job = kube.get(path_of("batch/v1", "jobs", env.namespace, name))
        ref = ObjectRef("Job", env.namespace, name)
        evictions.append(Eviction(ref, "Preempted"))
        versions[ref], prints[ref] = job["metadata"]["resourceVersion"], fingerprint(job)
    plan = Plan("test", "", 0, SolverReport("milp", "optimal", 0.0, 0.0, 0.0), tuple(admissions), tuple(evictions))
    path.write_text(render_saved(plan, versions, "yaml", prints))
    return str(path)


def apply(planes: Any, plan: str, worker_kc: Path | str | None = None, multikueue: bool = False) -> Any:
    workers = ["--multikueue-config", "stowplan-test"] if multikueue else \
        ["--worker", f"east={worker_kc or planes['w_kc']}"]
    return CliRunner().invoke(cli, ["apply", "--plan", plan, "--kubeconfig", str(planes["m_kc"]), *workers,
                                    "-q", *LEASE], auto_envvar_prefix="STOWPLAN")


def notes(job: dict[str, Any]) -> dict[str, str]:
    return job["metadata"].get("annotations") or {}


def worker_jobs(planes: Any, namespace: str) -> dict[str, dict[str, Any]]:
    listed = planes["w"].list(path_of("batch/v1", "jobs", namespace), label_selector=f"{ORIGIN_LABEL}=stowplan")
    return {j["metadata"]["name"]: j for j in listed if not j["metadata"].get("deletionTimestamp")}


def test_dispatch_idempotency_status_deletion_and_eviction(planes, api_client, namespace, tmp_path):
    env = world(planes, api_client, namespace)
    m = planes["m"]
    get = lambda name: m.get(path_of("batch/v1", "jobs", namespace, name))  # noqa: E731
    try:
        a = manager_job(m, namespace, "a", 2, managed_by="kueue.x-k8s.io/multikueue")
        b = manager_job(m, namespace, "b", 1)
        plan = plan_file(tmp_path / "plan.yaml", m, env, {"a": env.nodes[0], "b": env.nodes[1]})
        assert load_plan_with_fingerprints(plan)[0].admissions[0].cluster == "east"   # written and read back

        # 1. dispatch: the copies run on the worker at the plan's nodes; the manager's stay suspended and marked
        first = apply(planes, plan)
        assert first.exit_code == 0, first.output
        assert "2 dispatched" in first.output
        copies = worker_jobs(planes, namespace)
        assert sorted(copies) == ["a", "b"]
        assert notes(copies["a"])[ORIGIN_UID] == a["metadata"]["uid"]
        assert copies["a"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
        assert "managedBy" not in copies["a"]["spec"] and copies["a"]["spec"]["suspend"] is False
        assert {p.spec.node_name for p in env.wait_bound("a", 2)} == {env.nodes[0]}
        assert {p.spec.node_name for p in env.wait_bound("b", 1)} == {env.nodes[1]}
        for name in ("a", "b"):
            job = get(name)
            assert job["spec"]["suspend"] is True and notes(job)[DISPATCHED_TO] == "east"
            assert DISPATCHING_TO not in notes(job)
        manager_pods = m.list(path_of("v1", "pods", namespace))
        assert not list(manager_pods)                                      # nothing runs on the manager

        # 2. the same plan again, the worker now found as MultiKueue names it: nothing created twice
        uids = {n: j["metadata"]["uid"] for n, j in copies.items()}
        again = apply(planes, plan, multikueue=True)
        assert again.exit_code == 0, again.output
        assert "0 dispatched" in again.output and "2 already in place" in again.output
        assert {n: j["metadata"]["uid"] for n, j in worker_jobs(planes, namespace).items()} == uids

        # 3. status back: the annotation on both, the Job's status on the one an external controller manages
        def copied() -> bool:
            apply(planes, plan)
            seen = {n: json.loads(notes(get(n)).get(WORKER_STATUS) or "{}") for n in ("a", "b")}
            return seen["a"].get("active") == 2 and seen["b"].get("active") == 1 and \
                (get("a").get("status") or {}).get("active") == 2
        wait_for("worker status copied to the manager", copied, timeout=90, interval=1)
        assert json.loads(notes(get("a"))[WORKER_STATUS])["cluster"] == "east"
        assert not (get("b").get("status") or {}).get("active")          # the manager's job controller owns b's

        # 4. deletion: the manager's b deleted -> the worker's copy goes
        m.request("DELETE", path_of("batch/v1", "jobs", namespace, "b"),
                  body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
        empty = plan_file(tmp_path / "empty.yaml", m, env, {})
        gone = apply(planes, empty)
        assert gone.exit_code == 0, gone.output
        assert "1 worker copies deleted" in gone.output
        assert sorted(worker_jobs(planes, namespace)) == ["a"]

        # 5. eviction = removal on the worker; the manager's copy stays, suspended and unmarked
        evict = plan_file(tmp_path / "evict.yaml", m, env, {}, evicted=("a",))
        out = apply(planes, evict)
        assert out.exit_code == 0, out.output
        assert "1 removed by eviction" in out.output
        assert worker_jobs(planes, namespace) == {}
        job = get("a")
        assert job["spec"]["suspend"] is True and DISPATCHED_TO not in notes(job)
        assert "removed from worker cluster east" in notes(job)["stowplan.io/eviction-reason"]
    finally:
        env.cleanup()


def test_least_privilege_denies_what_dispatch_does_not_need(planes):
    """The dispatch identities cannot read Secrets or create Jobs on the manager, nor create an
    unlabelled Job on the worker (the policy of worker.yaml), nor update a worker Job."""
    m_limited = Kube(connect(str(planes["m_kc"])))
    w_limited = Kube(connect(str(planes["w_kc"])))
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"x-{uuid.uuid4().hex[:6]}"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "x", "image": "registry.invalid/x:1"}]}}}}
    for kube, method, path, body in (
            (m_limited, "GET", path_of("v1", "secrets", "default"), None),
            (m_limited, "POST", path_of("batch/v1", "jobs", "default"), job),
            (w_limited, "GET", path_of("v1", "secrets", "default"), None),
            (w_limited, "POST", path_of("batch/v1", "jobs", "default"), job)):
        with pytest.raises(ApiStatus) as denied:
            kube.request(method, path, body=body)
        assert denied.value.status == 403, (method, path)
    assert "multikueue-origin" in str(denied.value)       # refused by the policy, not RBAC: create is granted


def test_worker_lost_mid_apply_then_repaired(planes, api_client, namespace, tmp_path):
    env = world(planes, api_client, namespace)
    m, worker = planes["m"], planes["worker"]
    get = lambda name: m.get(path_of("batch/v1", "jobs", namespace, name))  # noqa: E731
    try:
        for name in ("c", "d"):
            manager_job(m, namespace, name, 1)
        plan = plan_file(tmp_path / "plan.yaml", m, env, {"c": env.nodes[0], "d": env.nodes[1]})

        # a worker that does not answer at all: exit 7, and the manager's Jobs are not even reserved
        dead = tmp_path / "dead.kubeconfig"
        config = yaml.safe_load(worker.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
        dead.write_text(yaml.safe_dump(config))
        out = apply(planes, plan, worker_kc=dead)
        assert out.exit_code == 7, out.output
        assert "east" in out.output
        assert all(DISPATCHING_TO not in notes(get(n)) and DISPATCHED_TO not in notes(get(n)) for n in ("c", "d"))

        # the worker's API server dies between the two creates
        w = Kube(connect(str(worker.kubeconfig)))
        posts: list[str] = []

        def crash(method: str, path: str) -> None:
            if method == "POST" and path.endswith("/jobs"):
                posts.append(path)
                if len(posts) == 2:
                    worker.stop_apiserver()

        w.before_write = crash
        loaded, versions, prints = load_plan_with_fingerprints(plan)
        report = Dispatcher(m, {"east": w}, planned_versions=versions, fingerprints=prints).run(loaded, 0.0)
        assert list(report.unreachable) == ["east"]
        assert [ref.name for ref, _ in report.dispatched] == ["c"]
        d = get("d")
        assert d["spec"]["suspend"] is True and notes(d)[DISPATCHING_TO] == "east"   # reserved, lost nowhere
        assert DISPATCHED_TO not in notes(d)

        # the worker is back: the next apply repairs, creating nothing twice
        worker.start_apiserver()
        worker.restart_controllers()     # their watches back off after the crash
        repaired = apply(planes, plan)
        assert repaired.exit_code == 0, repaired.output
        assert sorted(worker_jobs(planes, namespace)) == ["c", "d"]
        assert {p.spec.node_name for p in env.wait_bound("d", 1)} == {env.nodes[1]}
        assert {p.spec.node_name for p in env.wait_bound("c", 1)} == {env.nodes[0]}
        assert notes(get("d"))[DISPATCHED_TO] == "east" and DISPATCHING_TO not in notes(get("d"))
    finally:
        env.cleanup()


# ---------------------------------------------------------------- plan the fleet live, then apply it

def plan_fleet(planes: Any, *args: str) -> Any:
    """`stowplan plan` on the manager (admin: planning reads every kind, as cronjob/rbac.yaml's reader)."""
    return CliRunner().invoke(cli, ["plan", "--kubeconfig", str(planes["manager"].kubeconfig), "-q", *args],
                              auto_envvar_prefix="STOWPLAN")


def manager_queue(control_plane: Any, api_client: Any, namespace: str) -> Env:
    """The manager's side: a ClusterQueue with GPU quota and the LocalQueue `lq` (no nodes: the workers run the work)."""
    return Env(control_plane, api_client, namespace, nodes=0, quota=64)


def placed(plan_path: Path) -> dict[str, str | None]:
    return {a.workload.name: a.cluster for a in load_plan_with_fingerprints(str(plan_path))[0].admissions}


def test_plan_worker_reads_the_fleet_live_and_apply_runs_it_where_planned(planes, control_plane, api_client,
                                                                          namespace, tmp_path):
    """`plan --worker east=... --worker west=...` reads the manager and both workers live; the
    plan places each Job on the one worker it fits; `apply --plan FILE --worker ...` creates
    each Job there (and refuses the plan once a Job changed); a worker that does not answer is
    exit 7, nothing written; the single-cluster apply refuses a fleet plan."""
    m = planes["m"]
    get = lambda name: m.get(path_of("batch/v1", "jobs", namespace, name))  # noqa: E731
    west_plane = rig.ControlPlane(manifest=rig.build())
    west_plane.start()
    boss = east = west = None
    try:
        admin_west = Kube(connect(str(west_plane.kubeconfig)))
        install(admin_west, MULTI / "worker.yaml")
        west_kc = token_kubeconfig(west_plane, admin_west, tmp_path / "west.kubeconfig")
        admin_west.request("POST", path_of("v1", "namespaces"), body={"metadata": {"name": namespace}})
        boss = manager_queue(control_plane, api_client, namespace)
        east = world(planes, api_client, namespace)                      # 2 nodes of 8 GPUs
        west = Env(west_plane, west_plane.api_client(), namespace, nodes=1, gpus=4)   # 1 node of 4 GPUs
        manager_job(m, namespace, "big", 2, gpus=8)      # 16 GPUs: only east has them
        manager_job(m, namespace, "small", 1, gpus=4)    # fits either; east is full once big runs there
        manager_job(m, namespace, "huge", 3, gpus=8)     # fits no worker
        workers = ["--worker", f"east={planes['worker'].kubeconfig}", "--worker", f"west={west_plane.kubeconfig}"]

        shown = plan_fleet(planes, *workers, "-o", "json")
        assert shown.exit_code == 0, shown.output
        document = json.loads(shown.stdout)
        assert {a["workload"]["name"]: a["cluster"] for a in document["admissions"]} == {"big": "east",
                                                                                        "small": "west"}
        assert [p["workload"]["name"] for p in document["pending"] if p["workload"]["namespace"] == namespace] == \
            ["huge"]
        assert set(document["summary"]["clusters"]) == {"east", "west"}
        for a in document["admissions"]:                                # each on nodes of its own worker
            assert all(ps["topologyAssignment"]["levels"][-1] == "kubernetes.io/hostname" for ps in a["podSets"])
            nodes = {d["values"][-1] for ps in a["podSets"] for d in ps["topologyAssignment"]["domains"]}
            assert nodes <= set((east if a["cluster"] == "east" else west).nodes), a

        saved = tmp_path / "fleet.yaml"
        made = plan_fleet(planes, *workers, "--out", str(saved))
        assert made.exit_code == 0, made.output
        assert placed(saved) == {"big": "east", "small": "west"}
        _, versions, prints = load_plan_with_fingerprints(str(saved))
        assert set(versions) == set(prints) == {ObjectRef("Job", namespace, n) for n in ("big", "small")}
        assert versions[ObjectRef("Job", namespace, "big")] == get("big")["metadata"]["resourceVersion"]

        # the single-cluster apply would admit the Jobs on the manager, where their nodes are not: refused
        alone = CliRunner().invoke(cli, ["apply", "--plan", str(saved), "--kubeconfig", str(planes["manager"].kubeconfig),
                                         "-q", *LEASE], auto_envvar_prefix="STOWPLAN")
        assert alone.exit_code == 2 and "multi-cluster plan" in alone.output, alone.output
        assert all(get(n)["spec"]["suspend"] is True for n in ("big", "small"))

        def dispatch(plan: Path) -> Any:
            return CliRunner().invoke(cli, ["apply", "--plan", str(plan), "--kubeconfig", str(planes["m_kc"]),
                                            "--worker", f"east={planes['w_kc']}", "--worker", f"west={west_kc}",
                                            "-q", *LEASE], auto_envvar_prefix="STOWPLAN")

        # stale as apply has it: a Job changed on the manager since the plan -> exit 6, nothing dispatched
        m.write("PATCH", path_of("batch/v1", "jobs", namespace, "small"), {"metadata": {"labels": {"edited": "yes"}}},
                content_type="application/merge-patch+json")
        stale = dispatch(saved)
        assert stale.exit_code == 6 and "small" in stale.output, stale.output
        assert worker_jobs(planes, namespace) == {}

        fresh = tmp_path / "fresh.yaml"
        again = plan_fleet(planes, *workers, "--out", str(fresh))
        assert again.exit_code == 0, again.output
        assert placed(fresh) == {"big": "east", "small": "west"}
        done = dispatch(fresh)
        assert done.exit_code == 0, done.output
        assert "2 dispatched" in done.output
        assert sorted(worker_jobs(planes, namespace)) == ["big"]
        on_west = admin_west.list(path_of("batch/v1", "jobs", namespace), label_selector=f"{ORIGIN_LABEL}=stowplan")
        assert [j["metadata"]["name"] for j in on_west] == ["small"]
        assert {p.spec.node_name for p in east.wait_bound("big", 2)} == set(east.nodes)
        assert {p.spec.node_name for p in west.wait_bound("small", 1)} == set(west.nodes)
        assert notes(get("big"))[DISPATCHED_TO] == "east" and notes(get("small"))[DISPATCHED_TO] == "west"
        assert DISPATCHED_TO not in notes(get("huge")) and get("huge")["spec"]["suspend"] is True
        assert ObjectRef("Job", namespace, "huge") not in touched(load_plan_with_fingerprints(str(fresh))[0])

        # a worker that does not answer: exit 7 naming it, no plan written
        dead = tmp_path / "dead.kubeconfig"
        config = yaml.safe_load(west_plane.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
        dead.write_text(yaml.safe_dump(config))
        lost = tmp_path / "lost.yaml"
        out = plan_fleet(planes, "--worker", f"east={planes['worker'].kubeconfig}", "--worker", f"west={dead}",
                         "--out", str(lost))
        assert out.exit_code == 7, out.output
        assert "west" in out.output and "east:" not in out.output and not lost.exists()
    finally:
        for env in (boss, east, west):
            if env is not None:
                env.cleanup()
        west_plane.stop()


def test_plan_multikueue_config_reads_the_workers_from_the_manager(planes, control_plane, api_client, namespace,
                                                                   tmp_path):
    """`plan --multikueue-config NAME --kueue-namespace NS`: the workers are the config's
    MultiKueueClusters, reached through their kubeconfig Secrets in NS; the plan it saves is
    dispatched by `apply --plan FILE --multikueue-config NAME`."""
    m = planes["m"]
    secrets = f"kueue-plan-{uuid.uuid4().hex[:6]}"
    boss = manager_queue(control_plane, api_client, namespace)
    east = world(planes, api_client, namespace)
    try:
        manager_job(m, namespace, "one", 2, gpus=4)
        # kueue-system's Secret holds the dispatch identity, which may not read what planning reads
        refused = plan_fleet(planes, "--multikueue-config", "stowplan-test", "-o", "json")
        assert refused.exit_code == 4 and "worker cluster east" in refused.output, refused.output
        # in another namespace: a kubeconfig that may read the worker
        install(m, Path("-"), docs=[
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": secrets}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "east-kubeconfig", "namespace": secrets},
             "data": {"kubeconfig": base64.b64encode(planes["worker"].kubeconfig.read_bytes()).decode()}}])
        saved = tmp_path / "fleet.json"
        made = plan_fleet(planes, "--multikueue-config", "stowplan-test", "--kueue-namespace", secrets,
                          "--out", str(saved))
        assert made.exit_code == 0, made.output
        assert placed(saved) == {"one": "east"}
        done = apply(planes, str(saved), multikueue=True)
        assert done.exit_code == 0, done.output
        assert "1 dispatched" in done.output
        assert sorted(worker_jobs(planes, namespace)) == ["one"]
        assert {p.spec.node_name for p in east.wait_bound("one", 2)} <= set(east.nodes)
    finally:
        boss.cleanup()
        east.cleanup()
        m.request("DELETE", path_of("v1", "namespaces", "", secrets))
