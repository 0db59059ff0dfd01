"""`stowplan generate`: a synthetic snapshot, trace or fleet, seeded and deterministic."""

from __future__ import annotations

import os
import time
from typing import Callable, Sequence

import click

from planner.base.errors import InputError
from planner.cli.console import Progress
from planner.cli.group import cli, exit_codes_help, exits
from planner.cli.options import CONTEXT
from planner.cli.outputs import Outputs, check_writable, emit, out_format
from planner.k8s.annotations import GENERATOR


def _generate_help_epilog() -> str:
    """Presets and every GeneratorSpec field with its default, for `generate --help`."""
    from dataclasses import fields

    from planner.tools.generate import PRESETS, GeneratorSpec, format_value

    lines = ["\b", "Presets (fields not named keep the defaults below):"]
    for name, overrides in PRESETS.items():
        shape = "x".join(str(f) for f in overrides.get("fanout", GeneratorSpec().fanout))
        rest = ", ".join(f"{k}={format_value(v)}" for k, v in overrides.items() if k != "fanout")
        lines.append(f"  {name:<11} fanout={shape}, {rest}")
    lines += ["", "\b", "Parameters (--set KEY=VALUE; default in brackets):"]
    for f in fields(GeneratorSpec):
        lines.append(f"  {f.name} [{format_value(f.default)}]")
        lines.append(f"      {f.metadata['doc']}")
    from planner.tools.family import help_lines

    lines += ["", *help_lines()]
    lines += ["", exit_codes_help("generate")]
    return "\n".join(lines)


class _LazyEpilogCommand(click.Command):
    """Builds the long parameter list only when --help asks for it."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.epilog = _generate_help_epilog()
        super().format_epilog(ctx, formatter)


@cli.command("generate", cls=_LazyEpilogCommand, context_settings=CONTEXT)
@click.option("--preset", type=click.Choice(["S", "M", "L", "XL", "meta-like", "nvl72", "four-level", "fragmented", "fair",
                                            "family", "kueue-baseline"]),
              default="S", show_default=True, show_envvar=True,
              help="Starting shape: S/M/L/XL (512/4,096/16,384/65,536 nodes, the scale benchmark's) or a "
                   "topology fixture's (meta-like, nvl72, four-level); fair: four weighted teams with fair sharing on; "
                   "family: the seed draws the shape (issue 32's family; --set scale=S|M|L|XL|tiny); "
                   "kueue-baseline: Kueue's scheduler performance baseline (docs/simulate.md; --set scale=X).")
@click.option("--seed", type=int, show_envvar=True,
              help="Random seed (default: the preset's). The same seed and parameters give the same bytes.")
@click.option("--nodes", "nodes", metavar="AxBx...", show_envvar=True,
              help="Fan-out per topology level, coarse to fine, e.g. 4x16x16 = 4 blocks x 16 racks x 16 "
                   "nodes. With a different number of levels than the preset, the standard levels of "
                   "that depth are used (hostname; rack; block; datacenter).")
@click.option("--set", "settings", metavar="KEY=VALUE", multiple=True, show_envvar=True, envvar="STOWPLAN_GENERATE_SET",
              help="Set any parameter listed below (repeatable), e.g. --set pending=500 --set teams=12.")
@click.option("-o", "--output", "output", type=click.Choice(["json", "yaml"]), show_envvar=True,
              help="json (compact, the reader's fast path) or yaml (libyaml's CSafeDumper). Default: yaml for "
                   "an --out FILE ending in .yaml or .yml, else json.")
@click.option("--out", "out", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
              help="Write the snapshot to FILE (atomically: all or nothing) instead of stdout.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines.")
@click.option("--trace", "trace", is_flag=True, show_envvar=True,
              help="Write a trace (JSON lines, docs/simulate.md) of jobs arriving on the preset's cluster "
                   "instead of a snapshot: the snapshot's job mix, Philly's durations, Poisson arrivals.")
@click.option("--hours", "hours", type=click.FloatRange(min=0, max=24 * 366, min_open=True), show_envvar=True,
              help="With --trace: the hours of arrivals (default 24).")
@click.option("--load", "load", type=click.FloatRange(min=0, max=100, min_open=True), show_envvar=True,
              help="With --trace: offered GPU-time per hour as a multiple of the cluster's GPUs (default 1).")
@click.option("--fleet", "fleet", metavar="DIR", show_envvar=True, type=click.Path(file_okay=False),
              help="Write a MultiKueue fleet instead (docs/multicluster.md): DIR/manager.yaml (the queues and "
                   "pending Jobs) and one snapshot per worker (east, west, north, south: different sizes and "
                   "GPU types), for what-if --cluster. Takes --seed.")
@exits
def generate_command(preset: str, seed: int | None, nodes: str | None, settings: Sequence[str],
                     output: str | None, out: str | None, quiet: bool, trace: bool = False,
                     hours: float | None = None, load: float | None = None, fleet: str | None = None) -> None:
    """Generate a realistic synthetic snapshot (seeded, deterministic) to plan with what-if.

    A GPU cluster with a Kueue Topology (nodes labelled by level), flavors,
    ClusterQueues of several teams in a cohort (or a cohort tree of up to three levels) with
    borrowing and lending limits, WorkloadPriorityClasses, and Jobs and JobSets:
    small jobs after the Philly trace's size mix, multi-node training of 16 to
    2,048 GPUs with Kueue TAS annotations (required / preferred rack or block,
    slices, pod-set groups), pending ones suspended and running ones placed within
    node capacity and quota with stowplan.io/assignment, admitted-at and
    checkpointed-at. REFERENCE section 2 form, planning time in
    stowplan.io/snapshot-time.

    \b
    Examples:
      stowplan generate --preset M --out m.json && stowplan what-if m.json
      stowplan generate --preset meta-like --seed 7 --set pending=400 -o yaml --out meta.yaml
      stowplan generate --nodes 2x8x18 --set gpus_per_node=4 --set running=50 --out small.json
      stowplan generate --preset family --seed 7 --set scale=M --out family-7-m.json
      stowplan generate --preset S --trace --hours 4 --seed 7 --out trace.jsonl
      stowplan generate --fleet fleet/ --seed 7
    """
    if fleet is not None:
        _generate_fleet(fleet, 1 if seed is None else seed, Progress(quiet))
        return
    from planner.tools.generate import generate, generate_trace, to_json, to_json_lines, to_yaml
    from planner.tools.spec_options import spec_from_options

    say = Progress(quiet)
    output = out_format(output, out, ("json", "yaml"), default="json")
    to_stdout = out in (None, "-")
    if not to_stdout:
        assert out is not None
        check_writable(out)
    if not trace and (hours is not None or load is not None):
        raise InputError("--hours and --load shape a trace: give --trace too", field="--hours" if hours else "--load")
    if preset == "kueue-baseline":
        _kueue_baseline(trace, settings, out, say)
        return
    try:
        spec = spec_from_options(preset, seed, nodes, settings)
    except ValueError as error:
        raise InputError(str(error)) from None
    started = time.monotonic()
    if trace:
        hours = 24.0 if hours is None else hours
        lines = generate_trace(spec, hours, 1.0 if load is None else load)
        say(f"generated a trace of {len(lines) - 1} jobs over {hours:g} h for {spec.nodes} nodes "
            f"in {time.monotonic() - started:.2f}s")
        emit(to_json_lines(lines), None if to_stdout else out, say)
        return
    document = generate(spec)
    text = to_json(document) if output == "json" else to_yaml(document)
    meta = document["metadata"]["annotations"][GENERATOR]
    say(f"generated {len(document['items'])} objects ({meta}) in {time.monotonic() - started:.2f}s")
    emit(text, None if to_stdout else out, say)


def _generate_fleet(folder: str, seed: int, say: Callable[[str], None]) -> None:
    """generate --fleet DIR: the manager's and each worker's snapshot, all written or none."""
    from planner.output.document import dump_yaml
    from planner.tools import fleet_gen

    if os.path.exists(folder) and not os.path.isdir(folder):
        raise InputError("is not a folder", file=folder, field="--fleet")
    os.makedirs(folder, exist_ok=True)
    files = fleet_gen.fleet(seed)
    with Outputs() as outputs:
        for stem, data in files.items():
            outputs.file(os.path.join(folder, f"{stem}.yaml"), dump_yaml(data), field="--fleet")
        outputs.commit()
    say(f"wrote {', '.join(f'{s}.yaml' for s in files)} in {folder}")


def _kueue_baseline(trace: bool, settings: Sequence[str], out: str | None, say: Callable[[str], None]) -> None:
    """`generate --preset kueue-baseline`: Kueue's performance baseline (planner/tools/kueue_perf.py),
    the cluster or (--trace) its 15,000 workloads; --set scale=X keeps that share of them,
    --set nodes_per_queue=N sizes the cluster."""
    from planner.tools.generate import to_json, to_json_lines
    from planner.tools.kueue_perf import baseline_snapshot, baseline_trace

    values = {"scale": 1.0, "nodes_per_queue": 1.0}
    for setting in settings:
        key, _, text = setting.partition("=")
        if key.strip() not in values:
            raise InputError(f"--set {setting!r}: kueue-baseline takes scale and nodes_per_queue", field="--set")
        try:
            values[key.strip()] = float(text)
        except ValueError:
            raise InputError(f"--set {setting!r}: not a number", field="--set") from None
    if not 0 < values["scale"] <= 1 or not 1 <= values["nodes_per_queue"] <= 64:
        raise InputError("scale: above 0 and at most 1; nodes_per_queue: 1 to 64", field="--set")
    text = to_json_lines(baseline_trace(values["scale"])) if trace else \
        to_json(baseline_snapshot(int(values["nodes_per_queue"])))
    emit(text, None if out in (None, "-") else out, say)

