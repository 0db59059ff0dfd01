"""Issue 40: every door the program reads through, given what a careless user or an
attacker would give it. The contract: exit 0 with a valid plan (problems reported on
stderr, naming file, object and field), or exit 2 with one clear line naming the file
and the field, or the limit and the flag that raises it; never exit 1 (an internal
error), never a hang. Cases run the real CLI (click's runner, or a real process where
stdin, stdout or a file descriptor is the point); nothing is mocked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from helpers import JsonServer
from planner import cli as cli_module

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "fixtures" / "tiny.yaml"
STOWPLAN = [sys.executable, "-c", "from planner.cli import main; main()"]
HANG = 120   # seconds: only to stop a hang, never a speed check


def run(*args: str, input: str | bytes | None = None) -> Result:
    return CliRunner().invoke(cli_module.cli, list(args), input=input, auto_envvar_prefix="STOWPLAN")


def process(*args: str, **options: Any) -> subprocess.CompletedProcess[bytes]:
    streams = {"stderr": subprocess.PIPE} if "stdout" in options else {"capture_output": True}
    return subprocess.run([*STOWPLAN, *args], cwd=REPO, timeout=HANG, **streams, **options)


def tiny_text() -> str:
    return TINY.read_text()


def written(tmp_path: Path, text: str, name: str = "snap.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return str(path)


def tiny_with(tmp_path: Path, *extra: dict[str, Any], change: Any = None) -> str:
    """tiny.yaml as objects, changed by `change(items)` and with `extra` objects, as YAML."""
    document = yaml.safe_load(tiny_text())
    if change is not None:
        change(document["items"])
    document["items"].extend(extra)
    return written(tmp_path, yaml.safe_dump(document, sort_keys=False))


def item(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in items if o["kind"] == kind and o["metadata"]["name"] == name)


def assert_refused(result: Result | subprocess.CompletedProcess[bytes], *words: str) -> str:
    code = result.exit_code if isinstance(result, Result) else result.returncode
    err = result.stderr if isinstance(result, Result) else result.stderr.decode("utf-8", "replace")
    assert code == 2, f"exit {code}, expected 2: {err[-2000:]}"
    assert "internal error" not in err and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"
    return lines[0]


def assert_planned(result: Result, *warned: str) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr[-2000:]
    for word in warned:
        assert word in result.stderr, f"{word!r} not warned about: {result.stderr[-2000:]}"
    plan = json.loads(result.stdout)
    assert plan["kind"] == "Plan"
    return plan


def what_if(path: str, *args: str) -> Result:
    return run("what-if", path, "-o", "json", "--solver", "greedy", *args)


# ---------------------------------------------------------------- YAML scalars and keys

@pytest.mark.parametrize("value, says", [
    ("!!int abc", "is not an integer"),
    ("!!float abc", "is not a number"),
    ("!!bool maybe", "is not true or false"),
    ("9" * 5000, "is not an integer"),          # more than Python's 4,300 digits
    ("!!binary aGk=", "has no JSON equivalent"),
    ("!!set {a}", "has no JSON equivalent"),
])
def test_a_scalar_python_cannot_build_is_exit_2_at_its_line(tmp_path: Path, value: str, says: str) -> None:
    text = tiny_text().replace('      nvidia.com/gpu: "4"\n', f"      nvidia.com/gpu: {value}\n", 1)
    line = assert_refused(what_if(written(tmp_path, text)), "snap.yaml", "malformed YAML at line", says)
    assert len(line) < 400


@pytest.mark.parametrize("stamp", ["!!timestamp garbage", "2026-13-01", "2026-02-30", "!!timestamp 2026-02-30"])
def test_a_bad_date_is_the_objects_problem_not_a_crash(tmp_path: Path, stamp: str) -> None:
    text = tiny_text().replace('creationTimestamp: "2026-12-01T09:00:00Z"', f"creationTimestamp: {stamp}", 1)
    assert text != tiny_text()
    assert_planned(what_if(written(tmp_path, text)), "metadata.creationTimestamp")


def test_a_bare_date_reads_as_the_text_kubernetes_reads(tmp_path: Path) -> None:
    text = tiny_text().replace('creationTimestamp: "2026-12-01T09:00:00Z"', "creationTimestamp: 2026-12-01", 1)
    result = what_if(written(tmp_path, text))
    assert result.exit_code == 0 and "creationTimestamp" not in result.stderr, result.stderr


def test_number_keys_are_their_text_and_a_null_key_is_refused(tmp_path: Path) -> None:
    text = tiny_text().replace("      team: research\n", "      team: research\n      1: one\n      true: yes\n", 1)
    assert_planned(what_if(written(tmp_path, text)))
    text = tiny_text().replace('      nvidia.com/gpu: "4"\n', '      nvidia.com/gpu: "4"\n      ~: "1"\n', 1)
    assert_refused(what_if(written(tmp_path, text)), "a mapping key must be a string, got null")


def test_a_lone_surrogate_in_a_json_name_is_refused_naming_the_field(tmp_path: Path) -> None:
    document = yaml.safe_load(tiny_text())
    text = json.dumps(document).replace('"name": "gpu-node-1"', '"name": "gpu\\ud800node"', 1)
    assert_refused(what_if(written(tmp_path, text, "snap.json")), "lone UTF-16 surrogate", "metadata.name")


def test_flow_style_yaml_starting_with_a_brace_is_read_as_yaml(tmp_path: Path) -> None:
    # a decision (README, Bad input): text that is not JSON but is valid YAML is read as YAML
    document = yaml.safe_load(tiny_text())
    text = yaml.safe_dump(document, default_flow_style=True).replace('"', "")
    assert text.lstrip().startswith("{")
    assert_planned(what_if(written(tmp_path, text)))


def test_an_empty_file_plans_an_empty_cluster(tmp_path: Path) -> None:
    plan = assert_planned(what_if(written(tmp_path, "")))
    assert plan["admissions"] == [] and plan["pending"] == []


# ---------------------------------------------------------------- numbers in fields and annotations

@pytest.mark.parametrize("value", ["²", "١٢", "1" * 30, "-1", "1e3"])
def test_integer_annotations_take_ascii_digits_only(tmp_path: Path, value: str) -> None:
    def change(items: list[dict[str, Any]]) -> None:
        job = item(items, "Job", "eval-sweep")
        job["metadata"].setdefault("annotations", {})["kueue.x-k8s.io/job-min-parallelism"] = value

    assert_planned(what_if(tiny_with(tmp_path, change=change)), "job-min-parallelism")


@pytest.mark.parametrize("key", ["stowplan.io/assignment", "kueue.x-k8s.io/podset-slice-required-topology-constraints"])
def test_deep_json_in_an_annotation_is_the_objects_problem(tmp_path: Path, key: str) -> None:
    def change(items: list[dict[str, Any]]) -> None:
        job = item(items, "Job", "eval-sweep")
        target = job if key.startswith("stowplan") else job["spec"]["template"]
        target.setdefault("metadata", {}).setdefault("annotations", {})[key] = "[" * 100_000 + "]" * 100_000
        if key.startswith("stowplan"):
            job["spec"]["suspend"] = False

    assert_planned(what_if(tiny_with(tmp_path, change=change)), "nested")


def test_huge_integers_in_counts_and_quantities_are_refused_or_the_objects_problem(tmp_path: Path) -> None:
    document = yaml.safe_load(tiny_text())
    item(document["items"], "Node", "gpu-node-2")["status"]["allocatable"]["cpu"] = "9" * 5000
    assert_planned(what_if(written(tmp_path, yaml.safe_dump(document))), "gpu-node-2", "allocatable")
    item(document["items"], "Job", "eval-sweep")["spec"]["parallelism"] = 10**5000
    sys.set_int_max_str_digits(0)
    try:
        text = json.dumps(document)   # as a number, past Python's 4,300 digits
    finally:
        sys.set_int_max_str_digits(4300)
    assert_refused(what_if(written(tmp_path, text, "snap.json")), "snap.json", "malformed JSON")
    item(document["items"], "Job", "eval-sweep")["spec"]["parallelism"] = 10**40
    assert_planned(what_if(written(tmp_path, json.dumps(document), "snap.json")), "eval-sweep", "spec.parallelism")


def test_pod_counts_past_a_clusters_size_wait_with_a_reason(tmp_path: Path) -> None:
    def change(items: list[dict[str, Any]]) -> None:
        job = item(items, "Job", "eval-sweep")
        job["spec"]["parallelism"] = job["spec"]["completions"] = 10**6

    plan = assert_planned(what_if(tiny_with(tmp_path, change=change)), "1,000,000 pods")
    assert any(p["workload"]["name"] == "eval-sweep" for p in plan["pending"])


def test_a_leaderworkerset_of_ten_million_groups_is_refused_by_field(tmp_path: Path) -> None:
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "many", "namespace": "ml-research", "labels": {"kueue.x-k8s.io/queue-name": "research-queue"}},
           "spec": {"replicas": 10**7, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
               "spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "1"}}}]}}}}}
    assert_planned(what_if(tiny_with(tmp_path, lws)), "spec.replicas", "10,000,000 groups")


def test_a_cohort_chain_thousands_deep_is_read_and_cut_with_a_reason(tmp_path: Path) -> None:
    cohorts = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": f"c{i}"},
                "spec": {"parentName": f"c{i - 1}"} if i else {}} for i in range(3000)]

    def change(items: list[dict[str, Any]]) -> None:
        item(items, "ClusterQueue", "research-cq")["spec"]["cohortName"] = "c2999"

    plan = assert_planned(what_if(tiny_with(tmp_path, *cohorts, change=change)), "more than 100")
    assert plan["admissions"] == []


# ---------------------------------------------------------------- size, stdin and special files

def test_stdin_from_dev_zero_is_refused_at_its_first_chunk() -> None:
    with open("/dev/zero", "rb") as zero:
        result = process("what-if", "-", "-o", "json", stdin=zero)
    assert_refused(result, "NUL byte")


def test_a_closed_or_unreadable_stdin_is_exit_2_naming_stdin(tmp_path: Path) -> None:
    closed = subprocess.run([*STOWPLAN, "what-if", "-", "-o", "json"], cwd=REPO, capture_output=True,
                            timeout=HANG, preexec_fn=lambda: os.close(0))
    assert_refused(closed, "-:", "stdin is closed")
    with open(tmp_path / "w", "wb") as write_only:    # read() on it fails with EBADF
        assert_refused(process("what-if", "-", "-o", "json", stdin=write_only), "-:", "cannot read")


def test_a_sparse_gigabyte_file_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "sparse.yaml"
    with open(path, "wb") as out:
        out.truncate(2**30)
    assert_refused(process("what-if", str(path)), "more than the limit", "--max-file-size")


def test_max_file_size_of_thousands_of_digits_is_a_flag_error() -> None:
    result = run("what-if", str(TINY), "--max-file-size", "9" * 5000)
    assert result.exit_code == 2 and "Traceback" not in result.output and "digits" in result.output


@pytest.mark.parametrize("args", [
    ("what-if", str(TINY), "--priority", "9" * 5000),          # click's own int type echoes the value
    ("what-if", str(TINY), "-o", "x" * 5000 + "\x1b[2J"),      # and its Choice
    ("generate", "--nodes", "9" * 5000),                       # and an input error of our own
])
def test_a_flag_error_echoing_a_huge_value_is_one_short_escaped_line(args: tuple[str, ...]) -> None:
    line = assert_refused(run(*args))
    assert len(line) < 1100 and "characters) ..." in line and "\x1b" not in line


# ---------------------------------------------------------------- policy, Kueue's Configuration, capacity specs

@pytest.mark.parametrize("field, value", [("timeLimitSeconds", "1" + "0" * 400), ("gap", "1" + "0" * 400),
                                          ("agingPerHour", "-1" + "0" * 400), ("restartCost", "9" * 4000),
                                          ("threads", "9" * 4000), ("seed", "9" * 5000)])
def test_policy_numbers_past_any_range_are_exit_2_naming_the_field(tmp_path: Path, field: str, value: str) -> None:
    text = f"apiVersion: stowplan.io/v1alpha1\nkind: PlannerPolicy\nmetadata: {{name: p}}\nspec:\n  {field}: {value}\n"
    policy = written(tmp_path, text, "policy.yaml")
    assert_refused(what_if(str(TINY), "--policy", policy), "policy.yaml")


BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x, x]"] +
                 [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)])


def configuration(text: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kueue-manager-config",
                                                                 "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
                                                       "kind: Configuration\n" + text}}


@pytest.mark.parametrize("text, says", [(BOMB, "alias bomb"), ("fairSharing: {enable: !!bool maybe}", "true or false"),
                                        ("waitForPodsReady: {timeout: " + "9" * 5000 + "s}", "too long")])
def test_kueues_configuration_is_read_by_the_same_bounded_decoder(tmp_path: Path, text: str, says: str) -> None:
    assert_refused(what_if(tiny_with(tmp_path, configuration(text))), "ConfigMap", "controller_manager_config", says)


@pytest.mark.parametrize("spec, says", [
    (BOMB, "alias bomb"),
    ("templates:\n- name: a\n  cost: 1\n  allocatable: {cpu: 1}\n  cost: 2\n", "given twice"),
    ("templates:\n- name: a\n  cost: 1\n  per: rack\n  hosts: 1e9\n  topology: [r]\n  allocatable: {cpu: 1}\n",
     "hosts"),
    ("templates:\n- name: a\n  cost: 1\n  per: rack\n  hosts: 1000000000\n  topology: [r]\n  allocatable: {cpu: 1}\n",
     "more than 16,384"),
    ("templates:\n- name: a\n  cost: 1\n  max: 100000\n  allocatable: {cpu: 1}\n"
     "- name: b\n  cost: 1\n  max: 100000\n  allocatable: {cpu: 1}\n"
     "- name: c\n  cost: 1\n  max: 100000\n  allocatable: {cpu: 1}\n", "could add 300,000 nodes"),
])
def test_a_capacity_spec_is_bounded_and_unambiguous(tmp_path: Path, spec: str, says: str) -> None:
    path = written(tmp_path, spec, "spec.yaml")
    assert_refused(what_if(str(TINY), "--add-nodes", path), "spec.yaml", says)


def test_a_fifo_as_capacity_spec_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    assert_refused(process("what-if", str(TINY), "--add-nodes", str(fifo)), "FIFO")


def test_a_kubeconfig_alias_bomb_is_refused_before_the_client_reads_it(tmp_path: Path) -> None:
    path = written(tmp_path, BOMB, "kubeconfig")
    assert_refused(process("plan", "--kubeconfig", path), "kubeconfig", "alias bomb")


# ---------------------------------------------------------------- outputs

def test_a_full_or_closed_stdout_is_exit_2_with_one_line() -> None:
    with open("/dev/full", "wb") as full:
        assert_refused(process("what-if", str(TINY), "-o", "yaml", stdout=full), "stdout", "No space left")
    closed = subprocess.run([*STOWPLAN, "what-if", str(TINY), "-o", "yaml"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, timeout=HANG, preexec_fn=lambda: os.close(1))
    assert_refused(closed, "stdout is closed")


@pytest.mark.parametrize("args", [("version",), ("--version",)])
def test_the_version_on_a_full_or_closed_stdout_is_exit_2_with_one_line(args: tuple[str, ...]) -> None:
    with open("/dev/full", "wb") as full:
        assert_refused(process(*args, stdout=full), "stdout", "No space left")
    closed = subprocess.run([*STOWPLAN, *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            timeout=HANG, preexec_fn=lambda: os.close(1))
    assert_refused(closed, "stdout is closed")


def test_out_equal_to_an_input_is_refused(tmp_path: Path) -> None:
    path = written(tmp_path, tiny_text())
    assert_refused(what_if(path, "--out", path), "--out", "is also an input")
    assert Path(path).read_text() == tiny_text()
    assert_refused(what_if(str(tmp_path), "--out", str(tmp_path / "plan.yaml")), "inside the input folder")


def hostile_names(items: list[dict[str, Any]]) -> None:
    item(items, "ClusterQueue", "research-cq")["metadata"]["name"] = "cq-$\\frac{$\u202e\x1b[31m"
    item(items, "LocalQueue", "research-queue")["spec"]["clusterQueue"] = "cq-$\\frac{$\u202e\x1b[31m"
    item(items, "Node", "gpu-node-1")["metadata"]["name"] = "node-$x^$\u202e"


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_del_and_c1_controls_in_names_are_escaped_in_json_and_yaml(tmp_path: Path, output: str) -> None:
    name = "cq-\x7f\x9b31m\x85"        # json.dumps leaves DEL and C1 raw; 0x9b is a terminal's CSI
    def rename(items: list[dict[str, Any]]) -> None:
        item(items, "ClusterQueue", "research-cq")["metadata"]["name"] = name
        item(items, "LocalQueue", "research-queue")["spec"]["clusterQueue"] = name
    result = run("what-if", tiny_with(tmp_path, change=rename), "-o", output)
    assert result.exit_code == 0, result.stderr
    assert not any("\x7f" <= c <= "\x9f" for c in result.stdout), repr(result.stdout)
    assert yaml.safe_load(result.stdout)["admissions"][0]["clusterQueue"] == name


@pytest.mark.parametrize("flag", ["--namespace", "--queue"])
def test_a_table_filter_is_echoed_escaped(flag: str) -> None:
    result = run("what-if", str(TINY), "-o", "table", flag, "a\u202eb\x1b[2J")
    assert result.exit_code == 0, result.stderr
    assert "\u202e" not in result.stdout and "\x1b" not in result.stdout and "a\\u202eb\\x1b[2J" in result.stdout


def test_hostile_names_reach_yaml_metrics_and_pictures_escaped(tmp_path: Path) -> None:
    path = tiny_with(tmp_path, change=hostile_names)
    picture, metrics = tmp_path / "p.svg", tmp_path / "m.prom"
    result = run("what-if", path, "-o", "yaml", "--picture", str(picture), "--metrics", str(metrics))
    assert result.exit_code == 0, result.stderr
    assert "\u202e" not in result.stdout and "\\u202e" in result.stdout.lower()
    assert yaml.safe_load(result.stdout)["admissions"][0]["clusterQueue"] == "cq-$\\frac{$\u202e\x1b[31m"
    assert "\x1b" not in metrics.read_text() and "\u202e" not in metrics.read_text()
    assert "$\\frac{$" in picture.read_text()       # drawn as the literal text, mathtext off
    result = run("what-if", path, "-o", "json", "--picture", str(tmp_path / "p.png"))
    assert result.exit_code == 0 and "\u202e" not in result.stdout, result.stderr


# ---------------------------------------------------------------- secrets

SECRET = "hunter2-planted"


def test_a_snapshot_keeps_no_entrypoint_runtime_env_or_start_params() -> None:
    from planner.cluster.reader import pruned

    container = {"name": "c", "image": "i", "env": [{"name": "P", "value": SECRET}], "args": [SECRET],
                 "command": [SECRET], "resources": {"requests": {"cpu": "1"}}}
    group = {"groupName": "w", "replicas": 1, "rayStartParams": {"redis-password": SECRET},
             "template": {"spec": {"containers": [container]}}}
    rayjob = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r", "namespace": "n"},
              "spec": {"entrypoint": f"python train.py --token {SECRET}", "runtimeEnvYAML": f"env_vars: {{K: {SECRET}}}",
                       "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {"redis-password": SECRET},
                                                            "template": {"spec": {"containers": [container]}}},
                                          "workerGroupSpecs": [group]}}}
    other = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"},
             "spec": {"deep": [{"env": [{"value": SECRET}], "command": SECRET}]}}
    out = pruned({"apiVersion": "v1", "kind": "List", "items": [rayjob, other]})
    assert SECRET not in json.dumps(out)
    assert out["items"][0]["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 1
    assert SECRET in json.dumps(rayjob)   # the live object is left alone


def test_api_errors_in_gos_struct_format_lose_env_values_and_commands() -> None:
    from planner.cluster.kube import scrub

    message = ('Job.batch "x" is invalid: spec.template: Invalid value: core.PodTemplateSpec{Spec:core.PodSpec{'
               f'Containers:[]core.Container{{core.Container{{Name:"main", Command:[]string{{"sh", "{SECRET}"}}, '
               f'Env:[]core.EnvVar{{core.EnvVar{{Name:"DB_PASSWORD", Value:"{SECRET}", ValueFrom:nil}}}}}}}}}}: '
               'field is immutable')
    assert SECRET not in scrub(message) and "field is immutable" in scrub(message)
    assert SECRET not in scrub(f"Env:[]EnvVar{{EnvVar{{Name:PASS,Value:{SECRET},ValueFrom:nil,}},}}")


def exec_plugin_kubeconfig(tmp_path: Path, script: str) -> str:
    """A kubeconfig file whose one user logs in through an exec plugin running `script`
    (its server unreachable), and its path."""
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(f"#!/bin/sh\n{script}\n")
    plugin.chmod(0o755)
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
                  "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
                  "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                  "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                            "command": str(plugin), "interactiveMode": "Never"}}}]}
    return written(tmp_path, yaml.safe_dump(kubeconfig), "kubeconfig")


def test_an_exec_plugins_stderr_is_shown_only_with_verbose(tmp_path: Path) -> None:
    path = exec_plugin_kubeconfig(tmp_path, f"echo 'token={SECRET}' >&2\nexit 1")
    quiet = process("plan", "--kubeconfig", path, stdin=subprocess.DEVNULL)
    assert quiet.returncode not in (0, 1) and SECRET not in quiet.stderr.decode(), quiet.stderr.decode()
    assert b"shown with -v" in quiet.stderr


@pytest.mark.parametrize("script, says", [
    ("exec sleep 600", "did not answer within 2 seconds"),                 # waiting for a login no one gives
    ("head -c 50000000 /dev/zero | tr '\\0' x", "wrote more than 1,048,576"),   # 50 MB read whole before
])
def test_an_exec_plugin_that_hangs_or_floods_is_stopped_at_its_bound(tmp_path: Path, script: str, says: str,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    from planner.cluster import kube

    monkeypatch.setattr(kube, "EXEC_PLUGIN_SECONDS", 2.0)
    result = run("snapshot", "--kubeconfig", exec_plugin_kubeconfig(tmp_path, script), "-q")
    assert result.exit_code == 4, result.stderr      # the client goes on without a token: the server is unreachable
    assert says in caplog.text + result.stderr


def a_kubeconfig(server: str = "https://127.0.0.1:1", user: dict[str, Any] | None = None,
                 cluster: dict[str, Any] | None = None) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                           "clusters": [{"name": "k", "cluster": {"server": server, **(cluster or {})}}],
                           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                           "users": [{"name": "u", "user": user or {"token": SECRET}}]})


@pytest.mark.parametrize("user, cluster, says", [
    ({"tokenFile": "/dev/zero"}, {}, "users[0].user.tokenFile: names '/dev/zero', which is a character device"),
    ({"tokenFile": "fifo"}, {}, "which is a FIFO"),                         # relative: from the kubeconfig's folder
    ({"token": "t"}, {"certificate-authority": "sparse"}, "clusters[0].cluster.certificate-authority"),
    ({"client-key": "sparse", "client-certificate": "sparse"}, {}, "more than the limit of 1,048,576"),
])
def test_files_a_kubeconfig_names_are_regular_and_small(tmp_path: Path, user: dict[str, Any],
                                                        cluster: dict[str, Any], says: str) -> None:
    os.mkfifo(tmp_path / "fifo")              # the client would block on it forever
    with open(tmp_path / "sparse", "wb") as sparse:
        sparse.truncate(2**30)                # and read this whole
    path = written(tmp_path, a_kubeconfig(user=user, cluster=cluster), "kubeconfig")
    assert_refused(run("snapshot", "--kubeconfig", path, "-q"), "kubeconfig", says)


def test_a_token_in_the_servers_url_is_never_shown(tmp_path: Path) -> None:
    path = written(tmp_path, a_kubeconfig(server=f"https://127.0.0.1:1/?token={SECRET}"), "kubeconfig")
    result = run("snapshot", "--kubeconfig", path, "-q")
    assert result.exit_code == 4 and "cannot reach" in result.stderr, result.stderr
    assert SECRET not in result.stderr + result.stdout


# ---------------------------------------------------------------- a hostile API server

@pytest.mark.parametrize("answer, says", [
    ({"kind": "NodeList", "apiVersion": "v1", "items": [], "metadata": {"continue": "same"}}, "repeated a continue"),
    ({"kind": "NodeList", "apiVersion": "v1", "items": {"a": 1}}, "malformed"),
    ({"kind": "NodeList", "apiVersion": "v1", "items": [5]}, "not an object"),
    ([1, 2], "not a List object"),
])
def test_a_list_answer_of_the_wrong_shape_or_a_repeated_token_is_exit_2(answer: Any, says: str) -> None:
    from kubernetes import client

    from planner.cluster.kube import Kube
    from planner.base.errors import InputError

    server = JsonServer(json.dumps(answer).encode())
    try:
        configuration = client.Configuration()
        configuration.host = server.url
        kube = Kube(client.ApiClient(configuration), timeout=10)
        with pytest.raises(InputError) as raised:
            list(kube.list("/api/v1/nodes"))
        assert raised.value.exit_code == 2 and says in str(raised.value)
    finally:
        server.close()


# ---------------------------------------------------------------- silently wrong, resolved as REFERENCE §2 says

def placed_on(plan: dict[str, Any]) -> set[str]:
    return {value for a in plan["admissions"] for ps in a["podSets"]
            for d in ps.get("topologyAssignment", {}).get("domains", []) for value in d["values"]}


def test_a_node_whose_unique_hostname_label_is_not_its_name_is_reported_once_and_still_takes_pods(
        tmp_path: Path) -> None:
    """The plan names the node (its topology value stays the node); apply pins it by the label."""
    def change(items: list[dict[str, Any]]) -> None:
        item(items, "Node", "gpu-node-1")["metadata"]["labels"]["kubernetes.io/hostname"] = "other-host"

    path = tiny_with(tmp_path, change=change)
    result = what_if(path)
    plan = assert_planned(result, "snap.yaml", "Node/gpu-node-1", "metadata.labels[kubernetes.io/hostname]",
                          "'other-host', not the node's name", "pins pods for this node by 'other-host'")
    assert result.stderr.count("'other-host', not the node's name") == 1
    assert placed_on(plan) == {"gpu-node-1", "gpu-node-2"}
    assert what_if(path, "--strict").exit_code == 2


def test_two_nodes_sharing_a_hostname_label_take_no_new_pod(tmp_path: Path) -> None:
    def change(items: list[dict[str, Any]]) -> None:
        item(items, "Node", "gpu-node-2")["metadata"]["labels"]["kubernetes.io/hostname"] = "gpu-node-1"

    path = tiny_with(tmp_path, change=change)
    result = what_if(path)
    plan = assert_planned(result, "Node/gpu-node-1", "'gpu-node-1' is also the label of gpu-node-2",
                          "Node/gpu-node-2", "'gpu-node-1' is also the label of gpu-node-1")
    assert placed_on(plan) == set()
    assert what_if(path, "--strict").exit_code == 2


def test_several_global_default_priority_classes_the_lowest_wins(tmp_path: Path) -> None:
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value, "globalDefault": True} for name, value in (("high-default", 5000), ("low-default", 50))]
    assert_planned(what_if(tiny_with(tmp_path, *classes)), "PriorityClass/high-default", "lowest value (50)")


def test_a_topology_with_hostname_above_rack_is_refused_as_kueues_crd_does(tmp_path: Path) -> None:
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "upside-down"},
                "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "example.com/rack"}]}}
    assert_planned(what_if(tiny_with(tmp_path, topology)), "Topology/upside-down", "spec.levels[0].nodeLabel",
                   "must be the last level")


def test_unmanaged_pods_over_committing_a_node_are_reported_and_it_counts_as_full(tmp_path: Path) -> None:
    hog = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog", "namespace": "default"},
           "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "c", "resources": {
               "requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]},
           "status": {"phase": "Running"}}
    plan = assert_planned(what_if(tiny_with(tmp_path, hog)), "Node/gpu-node-1", "nvidia.com/gpu 8 of 4",
                          "pods not managed by Stowplan")
    assert "gpu-node-1" not in placed_on(plan)


# ---------------------------------------------------------------- the decisions (README, Bad input)

@pytest.mark.parametrize("gpus, ok", [("1Ei", True), ("9223372036854775807", True), ("9223372036854775808", False)])
def test_huge_gpu_counts_within_int64_are_taken_as_written(tmp_path: Path, gpus: str, ok: bool) -> None:
    def change(items: list[dict[str, Any]]) -> None:
        item(items, "Node", "gpu-node-1")["status"]["allocatable"]["nvidia.com/gpu"] = gpus

    result = what_if(tiny_with(tmp_path, change=change))
    if ok:
        assert_planned(result)
    else:
        assert_planned(result, "gpu-node-1", "too large")


def test_a_time_limit_of_one_millisecond_still_gives_a_verified_plan() -> None:
    result = run("what-if", str(TINY), "-o", "json", "--time-limit", "0.001")
    plan = assert_planned(result)
    assert plan["solver"]["status"] in ("optimal", "feasible", "fallback")


def test_a_file_name_of_invalid_utf8_reaches_every_output_escaped(tmp_path: Path) -> None:
    name = os.fsdecode(b"snap-\xff\xfe.yaml")    # the OS's bytes, as Python gives them (lone surrogates)
    path = tmp_path / name
    path.write_text(tiny_text())
    for fmt in ("yaml", "json", "table"):
        result = subprocess.run([*STOWPLAN, "what-if", os.fsencode(path).decode("utf-8", "surrogateescape"),
                                 "-o", fmt], cwd=REPO, capture_output=True, timeout=HANG)
        assert result.returncode == 0, result.stderr.decode("utf-8", "replace")
        result.stdout.decode("utf-8")   # valid UTF-8 throughout


def test_plan_and_snapshot_refuse_an_out_that_is_their_config_or_kubeconfig(tmp_path: Path) -> None:
    config = written(tmp_path, tiny_text(), "kueue.yaml")
    assert_refused(run("plan", "--config", config, "--out", config), "--out", "is also an input")
    assert_refused(run("snapshot", "--config", config, "--out", config), "--out", "is also an input")
    kubeconfig = written(tmp_path, "apiVersion: v1\nkind: Config\n", "kubeconfig")
    assert_refused(run("plan", "--kubeconfig", kubeconfig, "--metrics", kubeconfig), "--metrics", "is also an input")
    assert Path(config).read_text() == tiny_text()


def test_a_snapshot_of_more_objects_than_the_limit_is_refused(tmp_path: Path) -> None:
    from planner.base.errors import InputError
    from planner.snapshot.loader import Limits, load

    path = written(tmp_path, "\n---\n".join(["{kind: ConfigMap, apiVersion: v1, metadata: {name: x}}"] * 20))
    assert len(load([path]).objects) == 20
    with pytest.raises(InputError, match="more than 10 objects"):
        load([path], Limits(max_objects=10))
