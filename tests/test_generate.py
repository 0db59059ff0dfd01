"""The snapshot generator (planner/tools/generate.py) and `stowplan generate`.

Determinism, that the reader takes its output with no problems, that counts and
shapes follow the spec, the Philly size mix, that running work respects node
capacity, quota and its own topology request, that TAS annotations read back as
the intended TopologyRequests, the CLI's atomic write, and that a generated
snapshot plans and verifies. The committed topology fixtures are exactly what
their presets generate.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from models import Decisions, SliceLayer, TopologyRequest, WorkloadState
from planner.tools import generate as g
from planner.base.solve_options import SolveOptions
from planner.cli import cli
from planner.cycle import plan_snapshot
from planner.snapshot import build_snapshot, read_snapshot
from planner.k8s.quantity import parse_quantity
from planner.verify import verify

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FIXTURE_PRESETS = ("meta-like", "nvl72", "four-level")
GPU = "nvidia.com/gpu"


def small_spec(**overrides):
    """A quick cluster: 2 blocks x 2 racks x 4 nodes."""
    base = dict(fanout=(2, 2, 4), teams=3, pending=30, running=15, max_job_gpus=64,
                multi_node_sizes=((16, 3), (32, 2), (64, 1)))
    base.update(overrides)
    return g.GeneratorSpec(**base)


def snapshot_of(spec):
    return build_snapshot([g.generate(spec)], source="generated")


# Every newer shape parameter at once: four flavors (one on two top-level domains), each
# queue in its own order, some with only some flavors, a three-level cohort tree with
# borrowing limits on cohorts, drawn policies, StrictFIFO queues.
MANY = dict(fanout=(5, 2, 4), gpu_flavors="h100:2,a100,l40s,b200", flavor_order="shuffled", subset_share=0.5,
            teams=12, cohort_groups=2, cohort_subgroups=3, cohort_limit_share=1.0, borrowing_limit=0.5,
            lending_limit=0.25, policy_mix=1.0, strict_fifo_share=0.5, pending=60, running=40)


@pytest.fixture(scope="module")
def snapshots():
    """Snapshots (and their documents) of S and the fixture presets, built once."""
    out = {}
    for name in ("S",) + FIXTURE_PRESETS:
        spec = g.preset(name)
        document = g.generate(spec)
        out[name] = (spec, document, build_snapshot([document], source=name))
    spec = small_spec(**MANY)
    document = g.generate(spec)
    out["many"] = (spec, document, build_snapshot([document], source="many"))
    return out


# ---------------------------------------------------------------- determinism

def test_same_seed_same_bytes_different_seed_different_bytes():
    spec = g.preset("S")
    first = g.to_json(g.generate(spec))
    assert first == g.to_json(g.generate(spec))
    assert first != g.to_json(g.generate(dataclasses.replace(spec, seed=spec.seed + 1)))


def test_yaml_and_json_say_the_same():
    document = g.generate(small_spec())
    text = g.to_yaml(document)
    assert "&id" not in text and "*id" not in text     # shared sub-dicts are written out, not aliased
    assert yaml.safe_load(text) == json.loads(g.to_json(document))


# ---------------------------------------------------------------- the reader takes it

@pytest.mark.parametrize("name", ("S",) + FIXTURE_PRESETS)
def test_reads_with_no_problems(snapshots, name):
    _, document, snapshot = snapshots[name]
    assert snapshot.problems == (), [str(p) for p in snapshot.problems[:5]]
    assert all(w.blocked_reason is None for w in snapshot.workloads)
    assert all(cq.active for cq in snapshot.cluster_queues.values())
    assert snapshot.now == g.parse_time(g.GeneratorSpec().now)
    assert snapshot.ignored_kinds == {}


def test_reads_from_a_json_and_a_yaml_file(tmp_path):
    document = g.generate(small_spec())
    (tmp_path / "s.json").write_text(g.to_json(document))
    (tmp_path / "s.yaml").write_text(g.to_yaml(document))
    a = read_snapshot([str(tmp_path / "s.json")])
    b = read_snapshot([str(tmp_path / "s.yaml")])
    assert a.problems == b.problems == ()
    assert a.workloads == b.workloads and a.nodes == b.nodes


# ---------------------------------------------------------------- counts and shapes

@pytest.mark.parametrize("name", ("S",) + FIXTURE_PRESETS)
def test_counts_and_shapes_follow_the_spec(snapshots, name):
    spec, document, snapshot = snapshots[name]
    assert len(snapshot.nodes) == math.prod(spec.fanout) == spec.nodes
    node = snapshot.nodes[0]
    assert node.allocatable.get(spec.gpu_resource) == spec.gpus_per_node
    assert node.allocatable.get("cpu") == spec.cpu_per_node * 1000
    assert all(n.usable for n in snapshot.nodes)
    (topology,) = snapshot.topologies.values()
    assert topology.levels == spec.levels
    for k, level in enumerate(spec.levels[:-1]):   # fan-out per level
        domains = {tuple(n.labels[lv] for lv in spec.levels[:k + 1]) for n in snapshot.nodes}
        assert len(domains) == math.prod(spec.fanout[:k + 1])
    assert set(snapshot.flavors) == {spec.flavor} | ({spec.second_flavor} if spec.second_flavor else set())
    assert all(f.topology_name == topology.name for f in snapshot.flavors.values())
    assert len(snapshot.cluster_queues) == spec.teams == len(snapshot.local_queues)
    expected_cohorts = 1 + spec.cohort_groups
    assert len(snapshot.cohorts) == expected_cohorts
    if spec.cohort_groups:
        assert {c.parent for n, c in snapshot.cohorts.items() if n != "org"} == {"org"}
    states = Counter(w.state for w in snapshot.workloads)
    assert states[WorkloadState.PENDING] == spec.pending
    assert states[WorkloadState.RUNNING] == spec.running
    assert states[WorkloadState.EXTERNAL] == 0
    # nominal quotas add up to the flavor's GPUs (quota_share 1), the root's own included
    for flavor in snapshot.flavors:
        nominal = sum(q.resources[spec.gpu_resource].nominal for cq in snapshot.cluster_queues.values()
                      for rg in cq.resource_groups for q in rg.flavors if q.flavor == flavor)
        nominal += sum(q.resources[spec.gpu_resource].nominal for c in snapshot.cohorts.values()
                       for rg in c.resource_groups for q in rg.flavors if q.flavor == flavor)
        label = snapshot.flavors[flavor].node_labels
        gpus = sum(n.allocatable.get(spec.gpu_resource) for n in snapshot.nodes
                   if all(n.labels.get(k) == v for k, v in label.items()))
        assert nominal == gpus
    limits = [q.resources[spec.gpu_resource] for cq in snapshot.cluster_queues.values()
              for rg in cq.resource_groups for q in rg.flavors]
    if spec.teams >= 6:
        assert any(q.borrowing_limit is not None for q in limits)
        assert any(q.lending_limit is not None for q in limits)
    priorities = {w.priority for w in snapshot.workloads}
    assert priorities == {value for _, value, _ in spec.priorities}


def test_the_presets_have_the_sizes_the_benchmark_needs():
    for name, nodes, levels, work in (("S", 512, 3, 300), ("M", 4096, 3, 2000), ("L", 16384, 4, 10000),
                                      ("XL", 65536, 4, 40000)):
        spec = g.preset(name)
        assert (spec.nodes, len(spec.levels), spec.pending, spec.running, spec.gpus_per_node) == \
            (nodes, levels, work, work, 8)
        spec.validate()


def test_nodes_setting_picks_standard_levels_for_another_depth():
    spec = g.preset("S")
    changed = dataclasses.replace(spec, **g.parse_setting(spec, "nodes", "2x4x8x16"))
    assert changed.fanout == (2, 4, 8, 16) and changed.levels == g.STANDARD_LEVELS[4]
    assert g.parse_setting(spec, "multi_node_sizes", "16:3,32:1") == {"multi_node_sizes": ((16, 3), (32, 1))}
    assert g.parse_setting(spec, "priorities", "hi:10:0.5,lo:0:0.5") == \
        {"priorities": (("hi", 10, 0.5), ("lo", 0, 0.5))}
    with pytest.raises(ValueError, match="unknown parameter"):
        g.parse_setting(spec, "nonsense", "1")
    with pytest.raises(ValueError, match="the last level"):
        dataclasses.replace(spec, levels=(g.BLOCK, g.RACK, "zone")).validate()


def test_one_level_and_two_flavors_work_too():
    for spec in (small_spec(levels=(g.HOSTNAME,), fanout=(12,)),
                 small_spec(second_flavor="a100", cohort_groups=2, root_quota_share=0.2)):
        snapshot = snapshot_of(spec)
        assert snapshot.problems == ()
        assert Counter(w.state for w in snapshot.workloads)[WorkloadState.PENDING] == spec.pending


# ---------------------------------------------------------------- flavors, cohort trees, policies

def _gpu_quota(cq_or_cohort):
    return {fq.flavor: fq.resources[GPU] for rg in cq_or_cohort.resource_groups for fq in rg.flavors}


def test_many_flavors_split_the_top_level_domains_and_every_queue_lists_them_its_way(snapshots):
    spec, _, snapshot = snapshots["many"]
    assert snapshot.problems == () and all(cq.active for cq in snapshot.cluster_queues.values())
    assert list(snapshot.flavors) == sorted(["h100", "a100", "l40s", "b200"])
    products = Counter(n.labels[spec.flavor_label] for n in snapshot.nodes)
    per_domain = spec.nodes // spec.fanout[0]           # h100 weighs 2: two of the five top-level domains
    assert products == {"NVIDIA-H100-80GB-HBM3": 2 * per_domain, "NVIDIA-A100-SXM4-80GB": per_domain,
                        "NVIDIA-L40S": per_domain, "NVIDIA-B200": per_domain}
    for node in snapshot.nodes:                          # a flavor's nodes are whole top-level domains
        top = node.labels[spec.levels[0]]
        assert {n.labels[spec.flavor_label] for n in snapshot.nodes if n.labels[spec.levels[0]] == top} == \
            {node.labels[spec.flavor_label]}
    orders = [[fq.flavor for rg in cq.resource_groups for fq in rg.flavors]
              for cq in snapshot.cluster_queues.values()]
    assert any(len(order) < 4 for order in orders)                    # some queues lack flavors
    spec_order = ["h100", "a100", "l40s", "b200"]
    assert any(order != sorted(order, key=spec_order.index) for order in orders)   # orders of their own
    gpus = {f: products[snapshot.flavors[f].node_labels[spec.flavor_label]] * spec.gpus_per_node
            for f in snapshot.flavors}
    for flavor, total in gpus.items():                   # every flavor's GPUs are some queues' nominal quota
        listed = [_gpu_quota(cq)[flavor].nominal for cq in snapshot.cluster_queues.values()
                  if flavor in _gpu_quota(cq)]
        assert listed and sum(listed) == total, flavor


def test_a_three_level_cohort_tree_with_borrowing_limits_on_cohorts(snapshots):
    spec, _, snapshot = snapshots["many"]
    parents = {name: c.parent for name, c in snapshot.cohorts.items()}
    assert parents == {"org": None, "org-1": "org", "org-2": "org", **{f"org-{g}-{s}": f"org-{g}"
                                                                      for g in (1, 2) for s in (1, 2, 3)}}
    leaves = Counter(cq.cohort for cq in snapshot.cluster_queues.values())
    assert set(leaves) == {f"org-{g}-{s}" for g in (1, 2) for s in (1, 2, 3)}   # every leaf has a queue
    for name, cohort in snapshot.cohorts.items():
        if name == "org":
            continue
        members = [cq for cq in snapshot.cluster_queues.values()
                   if cq.cohort == name or cq.cohort.startswith(name + "-")]
        for flavor, quota in _gpu_quota(cohort).items():  # cohort_limit_share 1: every cohort below org
            subtree = sum(_gpu_quota(cq)[flavor].nominal for cq in members if flavor in _gpu_quota(cq))
            assert quota.nominal == 0 and quota.borrowing_limit == int(subtree * spec.borrowing_limit)
        assert _gpu_quota(cohort)


def test_queue_limits_follow_their_factors():
    snapshot = snapshot_of(small_spec(borrowing_share=1.0, borrowing_limit=2.0, lending_share=1.0,
                                      lending_limit=0.25))
    for cq in snapshot.cluster_queues.values():
        for quota in _gpu_quota(cq).values():
            assert quota.borrowing_limit == 2 * quota.nominal
            assert quota.lending_limit == quota.nominal // 4


def test_policy_mix_draws_policies_kueue_accepts_and_strict_fifo_queues(snapshots):
    spec, _, snapshot = snapshots["many"]
    queues = list(snapshot.cluster_queues.values())
    policies = [cq.preemption for cq in queues]
    assert len({p.within_cluster_queue for p in policies}) > 1 and len({p.reclaim_within_cohort for p in policies}) > 1
    assert all(p.borrow_within_cohort == "Never" for p in policies if p.reclaim_within_cohort == "Never")
    assert len({(cq.when_can_borrow, cq.when_can_preempt) for cq in queues}) > 1
    assert Counter(cq.queueing_strategy for cq in queues) == {"StrictFIFO": 6, "BestEffortFIFO": 6}
    plain = snapshot_of(small_spec(teams=4))                # the default: one policy for all
    assert len({cq.preemption for cq in plain.cluster_queues.values()}) == 1


def test_the_new_parameters_are_checked():
    for overrides, message in ((dict(gpu_flavors="h100,a100,l40s"), "need as many top-level domains"),
                               (dict(gpu_flavors="h100,h100"), "distinct"),
                               (dict(gpu_flavors="7", fanout=(8, 2, 4)), "a count from 1"),
                               (dict(gpu_flavors="h100,a100", second_flavor="x"), "gpu_flavors replaces"),
                               (dict(cohort_subgroups=2), "needs cohort_groups"),
                               (dict(cohort_groups=2, cohort_subgroups=2), "at most teams"),
                               (dict(flavor_order="random"), "flavor_order"),
                               (dict(lending_limit=1.5), "lending_limit"),
                               (dict(borrowing_limit=-1.0), "borrowing_limit")):
        with pytest.raises(ValueError, match=message):
            small_spec(**overrides).validate()
    small_spec(gpu_flavors="2").validate()
    assert snapshot_of(small_spec(cohort_limit_share=0.5)).cohorts.keys() == {"org"}   # no cohort below org
    assert small_spec(gpu_flavors="2").gpu_flavor_list() == [("h100", g.GPU_PRODUCTS["h100"], 1.0),
                                                             ("a100", g.GPU_PRODUCTS["a100"], 1.0)]
    assert small_spec(gpu_flavors="mi300x:3").gpu_flavor_list() == [("mi300x", "MI300X", 3.0)]


# ---------------------------------------------------------------- the job mix

def test_small_jobs_follow_the_philly_mix():
    spec = small_spec(pending=6000, running=0, multi_node_share=0.0, fanout=(2, 2, 8))
    snapshot = snapshot_of(spec)
    sizes = Counter(sum(ps.count * ps.request.get(GPU) for ps in w.pod_sets) for w in snapshot.workloads)
    total = sum(sizes.values())
    for gpus, share in ((1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05)):
        assert abs(sizes[gpus] / total - share) < 0.02, (gpus, sizes[gpus] / total)
    assert set(sizes) == {1, 2, 4, 8}


def test_multi_node_jobs_are_whole_nodes_of_the_listed_sizes(snapshots):
    spec, _, snapshot = snapshots["S"]
    listed = {gpus for gpus, _ in spec.multi_node_sizes}
    large = [w for w in snapshot.workloads if sum(ps.count * ps.request.get(GPU) for ps in w.pod_sets) >= 16]
    assert len(large) >= 0.5 * spec.multi_node_share * spec.pending
    kinds = Counter(w.ref.kind for w in large)
    assert kinds["Job"] and kinds["JobSet"]
    for w in large:
        gpu_sets = [ps for ps in w.pod_sets if ps.request.get(GPU)]
        assert all(ps.request.get(GPU) == spec.gpus_per_node for ps in gpu_sets)
        assert sum(ps.count * ps.request.get(GPU) for ps in gpu_sets) in listed
        if w.ref.kind == "JobSet":
            assert [ps.name for ps in w.pod_sets] == ["launcher", "workers"]
            assert w.pod_sets[0].count == 1 and w.pod_sets[0].request.get(GPU) == 0


# ---------------------------------------------------------------- running work is valid

def _domain(node, levels, level):
    return tuple(node.labels[lv] for lv in levels[:levels.index(level) + 1])


@pytest.mark.parametrize("name", ("S",) + FIXTURE_PRESETS + ("many",))
def test_running_work_fits_nodes_quota_and_its_topology(snapshots, name):
    spec, _, snapshot = snapshots[name]
    nodes = {n.name: n for n in snapshot.nodes}
    used: dict[str, Counter] = defaultdict(Counter)
    quota_used: dict[tuple[str, str, str], int] = Counter()
    running = [w for w in snapshot.workloads if w.state is WorkloadState.RUNNING]
    assert running
    for w in running:
        assert w.admitted_at is not None and w.admitted_at <= snapshot.now
        assert w.created_at <= w.admitted_at
        if w.checkpointed_at is not None:
            assert w.admitted_at <= w.checkpointed_at <= snapshot.now
        pod_sets = {ps.name: ps for ps in w.pod_sets}
        assert {a.name for a in w.assignment} == set(pod_sets)
        group_domains = {}
        for a in w.assignment:
            ps = pod_sets[a.name]
            assert a.count == ps.count
            per_node = a.pods_per_node()
            for node_name, pods in per_node.items():
                node = nodes[node_name]
                flavor = snapshot.flavors[a.flavors["cpu"]]
                assert all(node.labels.get(k) == v for k, v in flavor.node_labels.items())
                for resource, amount in ps.request.items():
                    used[node_name][resource] += amount * pods
            for resource, amount in ps.request.items():
                if resource in a.flavors:
                    quota_used[(w.cluster_queue, a.flavors[resource], resource)] += amount * ps.count
            topo = ps.topology
            if topo.mode == "required":
                domains = {_domain(nodes[n], spec.levels, topo.level) for n in per_node}
                assert len(domains) == 1, (w.ref, topo.level, domains)
                if topo.group:
                    group_domains[a.name] = domains
            for layer in topo.slices:
                by_domain = Counter()
                for n, pods in per_node.items():
                    by_domain[_domain(nodes[n], spec.levels, layer.level)] += pods
                assert all(c % layer.size == 0 for c in by_domain.values()), (w.ref, by_domain)
        if len(group_domains) > 1:
            assert len({frozenset(d) for d in group_domains.values()}) == 1, w.ref
    for node_name, usage in used.items():
        allocatable = nodes[node_name].allocatable
        for resource, amount in usage.items():
            assert amount <= allocatable.get(resource), (node_name, resource, amount)
    for (cq_name, flavor, resource), amount in quota_used.items():
        cq = snapshot.cluster_queues[cq_name]
        (quota,) = [fq.resources[resource] for rg in cq.resource_groups for fq in rg.flavors
                    if fq.flavor == flavor]
        assert amount <= quota.nominal, (cq_name, flavor, resource, amount, quota.nominal)
    assert verify(snapshot, Decisions()) == []


def test_running_work_carries_preemption_inputs(snapshots):
    _, _, snapshot = snapshots["S"]
    running = [w for w in snapshot.workloads if w.state is WorkloadState.RUNNING]
    assert sum(w.checkpointed_at is not None for w in running) > len(running) // 3
    assert any(w.non_preemptible for w in running)
    hours = sorted((snapshot.now - w.admitted_at) / 3600 for w in running)
    assert hours[0] < 1 and hours[-1] > 17      # Philly's long tail of multi-day jobs


# ---------------------------------------------------------------- TAS annotations

def _expected_request(annotations):
    if not any(k.startswith("kueue.x-k8s.io/podset-") for k in annotations):
        return TopologyRequest()
    mode = level = None
    if g.REQUIRED in annotations:
        mode, level = "required", annotations[g.REQUIRED]
    elif g.PREFERRED in annotations:
        mode, level = "preferred", annotations[g.PREFERRED]
    elif annotations.get(g.UNCONSTRAINED) == "true":
        mode = "unconstrained"
    slices = ()
    if g.SLICE_TOPOLOGY in annotations:
        slices = (SliceLayer(annotations[g.SLICE_TOPOLOGY], int(annotations[g.SLICE_SIZE])),)
    return TopologyRequest(mode=mode, level=level, slices=slices, group=annotations.get(g.GROUP))


def _templates(obj):
    if obj["kind"] == "Job":
        yield "main", obj["spec"]["template"]
    else:
        for rjob in obj["spec"]["replicatedJobs"]:
            yield rjob["name"], rjob["template"]["spec"]["template"]


@pytest.mark.parametrize("name", ("S",) + FIXTURE_PRESETS)
def test_tas_annotations_read_as_the_intended_requests(snapshots, name):
    spec, document, snapshot = snapshots[name]
    workloads = {(w.ref.kind, w.ref.namespace, w.ref.name): w for w in snapshot.workloads}
    seen = Counter()
    for obj in document["items"]:
        if obj["kind"] not in ("Job", "JobSet"):
            continue
        meta = obj["metadata"]
        w = workloads[(obj["kind"], meta["namespace"], meta["name"])]
        pod_sets = {ps.name: ps for ps in w.pod_sets}
        for pod_set, template in _templates(obj):
            expected = _expected_request(template.get("metadata", {}).get("annotations", {}))
            assert pod_sets[pod_set].topology == expected
            assert expected.level is None or expected.level in spec.levels
            seen[expected.mode] += 1
            seen["slices"] += bool(expected.slices)
            seen["group"] += bool(expected.group)
            if expected.slices:
                assert pod_sets[pod_set].count % expected.slices[0].size == 0
    # S's racks hold 128 GPUs, so only its few larger jobs can have slices (none with seed 0)
    for kind in ("required", "preferred") + (("slices",) if name != "S" else ()):
        assert seen[kind], (name, kind, seen)
    if name in ("S", "meta-like"):
        assert seen["group"] and seen["unconstrained"], seen


def test_required_levels_hold_the_job():
    spec, snapshot = g.preset("meta-like"), None
    snapshot = snapshot_of(spec)
    span = {level: math.prod(spec.fanout[k + 1:]) for k, level in enumerate(spec.levels)}
    for w in snapshot.workloads:
        for ps in w.pod_sets:
            if ps.topology.mode == "required":
                assert ps.count <= span[ps.topology.level], (w.ref, ps.count, ps.topology.level)


# ---------------------------------------------------------------- the command

def test_cli_writes_exactly_the_generated_bytes_atomically(tmp_path):
    out = tmp_path / "nvl72.json"
    result = CliRunner().invoke(cli, ["generate", "--preset", "nvl72", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text() == g.to_json(g.generate(g.preset("nvl72")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nvl72.json"]    # no temp file left behind


def test_cli_settings_seed_nodes_and_yaml(tmp_path):
    out = tmp_path / "x.yaml"
    args = ["generate", "--seed", "9", "--nodes", "2x2x4", "--set", "pending=12", "--set", "running=5",
            "--set", "teams=2", "-o", "yaml", "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    spec = dataclasses.replace(g.preset("S"), seed=9, fanout=(2, 2, 4), pending=12, running=5, teams=2)
    assert yaml.safe_load(out.read_text()) == g.generate(spec)
    snapshot = read_snapshot([str(out)])
    assert snapshot.problems == () and len(snapshot.nodes) == 16


def test_cli_bad_parameter_writes_nothing_and_keeps_the_old_file(tmp_path):
    out = tmp_path / "keep.json"
    out.write_text("old")
    for args in (["--set", "teams=zero"], ["--set", "bogus=1"], ["--set", "levels=a,b"], ["--nodes", "4x0x2"]):
        result = CliRunner().invoke(cli, ["generate", *args, "--out", str(out)])
        assert result.exit_code == 2, (args, result.output)
        assert out.read_text() == "old"
    result = CliRunner().invoke(cli, ["generate", "--out", str(tmp_path / "missing" / "x.json")])
    assert result.exit_code == 2 and "does not exist" in result.output


@pytest.mark.parametrize("args, message", [
    (["--nodes", "abc"], "--nodes 'abc': expected AxBx... of whole numbers above 0"),
    (["--nodes", "4x0x2"], "--nodes '4x0x2': expected AxBx... of whole numbers above 0"),
    (["--set", "pending=x"], "--set pending='x': expected a whole number"),
    (["--set", "second_flavor_share=lots"], "--set second_flavor_share='lots': expected a number"),
    (["--set", "priorities=a:1"], "--set priorities='a:1': expected NAME:VALUE:SHARE"),
    (["--preset", "family", "--nodes", "abc"], "--nodes 'abc': expected AxBx..."),
])
def test_cli_bad_argument_names_the_flag_not_python(args, message):
    """Issue 39: `generate --nodes abc` printed int()'s message."""
    result = CliRunner().invoke(cli, ["generate", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "invalid literal" not in result.output


def test_cli_help_documents_every_parameter_and_preset():
    result = CliRunner().invoke(cli, ["generate", "--help"])
    assert result.exit_code == 0
    for f in dataclasses.fields(g.GeneratorSpec):
        assert f"  {f.name} [" in result.output, f.name
    for name in g.PRESETS:
        assert f"  {name} " in result.output


# ---------------------------------------------------------------- it plans

@pytest.mark.parametrize("solver", ["milp", "greedy"])
def test_a_generated_snapshot_plans_and_verifies(solver):
    spec = small_spec(seed=4, pending=40, running=20, fanout=(2, 2, 4))
    snapshot = snapshot_of(spec)
    plan = plan_snapshot(snapshot, SolveOptions(solver=solver, time_limit=20))
    assert plan.solver.status in ("optimal", "feasible")
    assert plan.admissions
    assert verify(snapshot, Decisions(plan.admissions, plan.evictions)) == []


# ---------------------------------------------------------------- committed fixtures

@pytest.mark.parametrize("name", FIXTURE_PRESETS)
def test_committed_fixture_is_what_its_preset_generates(name):
    path = FIXTURES / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path.name} not committed yet")
    assert path.read_text() == g.to_json(g.generate(g.preset(name)))
    assert os.path.getsize(path) < 5 * 2**20


def test_the_fragmented_preset_spreads_small_jobs_and_waits_for_racks():
    """issue 28's benchmark scenario: no rack is free, every pending job requires one."""
    spec = g.preset("fragmented")
    spec.validate()
    doc = g.generate(spec)
    jobs = [o for o in doc["items"] if o["kind"] in ("Job", "JobSet")]
    pending = [j for j in jobs if j["spec"].get("suspend")]
    assert pending and all(
        j["spec"]["template"]["metadata"]["annotations"].get(g.REQUIRED) == g.RACK for j in pending)
    racks: dict[str, int] = {}
    for j in jobs:
        if j["spec"].get("suspend"):
            continue
        for entry in json.loads(j["metadata"]["annotations"][g.ASSIGNMENT]):
            for domain in entry["topologyAssignment"]["domains"]:
                rack = domain["values"][-1].rsplit("-", 1)[0]
                racks[rack] = racks.get(rack, 0) + domain["count"]
    assert len(racks) == 16     # every rack runs something: none is free for a rack job
def test_fair_preset_turns_fair_sharing_on_with_weights_and_an_idle_team():
    snap = build_snapshot(g.generate(g.preset("fair"))["items"], source="fair")
    assert snap.kueue_config.fair_sharing.enabled and not snap.problems
    weights = {name: q.fair_weight for name, q in sorted(snap.cluster_queues.items())}
    assert sorted(weights.values()) == [1.0, 1.0, 2.0, 3.0]
    idle = [name for name in snap.cluster_queues if not any(w.cluster_queue == name for w in snap.workloads)]
    assert idle == ["team-recsys-cq"]
