"""A node whose kubernetes.io/hostname label is not its name, on the real control plane
(issue 40, REFERENCE §2): `stowplan apply` admits a Job onto it, and kube-scheduler binds
the Job's pods there, because every pin names the label, which is what the scheduler
matches (a pin by the node's name would match no node and leave the pod Pending)."""

from __future__ import annotations

import json
import time

from click.testing import CliRunner

from planner.cli import cli
from live_kit import HOSTNAME, Env, per_node


def test_apply_pins_a_relabelled_node_by_its_label_and_the_scheduler_binds_there(control_plane, api_client,
                                                                                 namespace):
    env = Env(control_plane, api_client, namespace, nodes=2, gpus=8)
    try:
        relabelled, plain = env.nodes
        label = f"host-{env.s}-renamed"
        env.core.patch_node(relabelled, {"metadata": {"labels": {HOSTNAME: label}}})
        # both nodes' GPUs: the Job fits only if the relabelled node takes pods
        env.job("wide", pods=2, gpus=8)
        kubeconfig = ["--kubeconfig", str(control_plane.kubeconfig)]
        planned = CliRunner().invoke(cli, ["plan", *kubeconfig, "-o", "json", "-q"])
        assert planned.exit_code == 0, planned.output
        warned = [line for line in planned.stderr.splitlines() if f"Node/{relabelled}" in line]
        assert len(warned) == 1 and f"metadata.labels[{HOSTNAME}]" in warned[0] and label in warned[0], warned
        (admission,) = [a for a in json.loads(planned.stdout)["admissions"] if a["workload"]["name"] == "wide"]
        # the plan names the node itself (the hostname topology level is the node)
        assert sorted(v for d in admission["podSets"][0]["topologyAssignment"]["domains"] for v in d["values"]) \
            == sorted([relabelled, plain])

        args = ["apply", *kubeconfig, "--namespace", namespace, "--release-wait", "15", "-q"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert "1 admitted" in result.stdout and "0 conflicts" in result.stdout, result.output

        job = env.batch.read_namespaced_job("wide", namespace)
        (term,) = job.spec.template.spec.affinity.node_affinity \
            .required_during_scheduling_ignored_during_execution.node_selector_terms
        pins = [e for e in term.match_expressions if e.key == HOSTNAME]
        assert [sorted(e.values) for e in pins] == [sorted([label, plain])]

        # pods the job controller makes after the release window: the next cycles release them
        deadline = time.monotonic() + 240
        while len([p for p in env.pods("wide") if p.spec.node_name]) < 2 and time.monotonic() < deadline:
            time.sleep(1)
            again = CliRunner().invoke(cli, args)
            assert again.exit_code == 0, again.output
        pods = env.wait_bound("wide", 2)
        assert per_node(pods) == {relabelled: 1, plain: 1}
        pinned = {p.spec.node_name: p.spec.node_selector[HOSTNAME] for p in pods}
        assert pinned == {relabelled: label, plain: plain}
    finally:
        env.cleanup()
