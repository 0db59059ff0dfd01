"""planner.cluster.status without a cluster: what the ConfigMap says, and patch-then-create."""

from models import ObjectRef, Plan, SolverReport
from planner.cluster.apply import ApplyReport
from planner.cluster.kube import MERGE_PATCH, ApiStatus
from planner.cluster.status import NAME, status_data, write_status


def plan() -> Plan:
    return Plan("s", "d", 1, SolverReport("milp", "feasible", 10.0, 12.0, 1 / 6, {"total": 1.23456}),
                summary={"served_gpus": {100: 8, 0: 2}, "preemption_cost": 1.5,
                         "vs_kueue": {"difference": {"served_gpus": {100: 8, 0: -2}}, "says": "+8 GPUs at priority 100"}})


def test_status_data_is_strings_naming_the_cycle():
    report = ApplyReport(conflicts=[(ObjectRef("Job", "a", f"j{i}"), "changed") for i in range(25)])
    data = status_data(plan(), report, 0.0)
    assert all(isinstance(v, str) for v in data.values())
    assert data["time"] == "1970-01-01T00:00:00Z" and data["status"] == "feasible"
    assert data["gap"] == "0.16666666666666666" and data["conflicts"] == "25"
    assert data["conflictDetails"].splitlines()[-1] == "... 5 more"
    assert data["vsKueue"] == "+8 GPUs at priority 100"
    assert data["gainOverGreedyGpus"] == '{"0":-2.0,"100":8.0}'
    assert data["servedGpus"] == '{"0":2,"100":8}'


class Recorder:
    def __init__(self, missing: bool):
        self.missing, self.calls = missing, []

    def write(self, method, path, body, content_type="application/json"):
        self.calls.append((method, path, content_type))
        if method == "PATCH" and self.missing:
            raise ApiStatus(method, path, 404, "not found")


def test_patch_first_then_create_when_absent():
    present, absent = Recorder(False), Recorder(True)
    write_status(present, "ns", {"a": "b"})
    write_status(absent, "ns", {"a": "b"})
    assert present.calls == [("PATCH", f"/api/v1/namespaces/ns/configmaps/{NAME}", MERGE_PATCH)]
    assert absent.calls[-1] == ("POST", "/api/v1/namespaces/ns/configmaps", "application/json")
