"""`stowplan snapshot`: the live cluster read into a file `what-if` plans as `plan` would."""

from __future__ import annotations

import functools
from typing import Any, Sequence

import click

from planner.cli.console import Progress, report_problems
from planner.cli.group import cli, exit_codes_help, exits
from planner.cli.options import CONTEXT, cluster_options, connect_kube
from planner.cli.outputs import check_writable, out_format, write_atomically, write_stdout


@cli.command("snapshot", context_settings=CONTEXT, epilog=exit_codes_help("snapshot"))
@click.option("-o", "--output", "output", type=click.Choice(["yaml", "json"]), show_envvar=True,
              help="Output format, as kubectl's -o. Default: json for an --out FILE ending in .json, "
                   "else yaml; json on stdout.")
@click.option("--out", "out", metavar="FILE", show_envvar=True, type=click.Path(dir_okay=False),
              help="Write the snapshot to FILE instead of stdout (a .json FILE with -o yaml is refused).")
@functools.partial(cluster_options, policy_help="PlannerPolicy YAML (stowplan.io/v1alpha1), written into the "
                   "snapshot in place of any other, so that what-if plans with it.")
@click.option("-q", "--quiet", is_flag=True, show_envvar=True, help="No progress lines.")
@exits
def snapshot_command(output: str | None, out: str | None, kubeconfig: str | None, context: str | None,
                     config: Sequence[str], policy: str | None, quiet: bool) -> None:
    """Read the live cluster into a snapshot file that `what-if` plans exactly as `plan` would.

    Lists every kind Stowplan reads (paginated), as one `kind: List` with a
    stowplan.io/snapshot-time annotation (the planning time). What planning never
    reads is left out: managedFields, annotations other than stowplan.io/* and
    kueue.x-k8s.io/*, and of each container all but name, image, resources and
    restartPolicy (no env, command, args or probes), and at any depth of any kind's
    spec its env, args, command, entrypoint, runtimeEnvYAML and rayStartParams. The
    file is written 0600.

    \b
    Examples:
      stowplan snapshot --out snap.json && stowplan what-if snap.json
      stowplan snapshot --config kueue-objects.yaml --out snap.yaml
      stowplan snapshot -o yaml | less
    """
    import json

    import yaml

    from planner.cluster import read_cluster
    from planner.cluster.reader import pruned
    from planner.snapshot.loader import refuse_overwriting

    say = Progress(quiet)
    refuse_overwriting([("--out", out)], [*config, policy, kubeconfig])
    fmt = out_format(output, out, ("yaml", "json"), default="json" if out in (None, "-") else "yaml")
    if out not in (None, "-"):
        assert out is not None
        check_writable(out)
    live = read_cluster(connect_kube(kubeconfig, context), config_files=config, policy_file=policy, say=say)
    report_problems(live.snapshot)
    say(f"read {live.snapshot.object_count} objects in {live.seconds:.2f}s")
    document = with_policy(pruned(live.document), policy)
    if fmt == "json" and out not in (None, "-"):
        text = json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n"
    elif fmt == "yaml":
        text = yaml.dump(document, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False,
                         allow_unicode=True, width=4096)
    else:
        text = json.dumps(document, indent=1, ensure_ascii=False) + "\n"
    if out in (None, "-"):
        write_stdout(text)
    else:
        assert out is not None
        write_atomically(out, text, mode=0o600)   # a snapshot describes the whole cluster: its owner's only
        say(f"wrote {out}")


def with_policy(document: dict[str, Any], policy: str | None) -> dict[str, Any]:
    """The snapshot with --policy's PlannerPolicy in place of any other (from --config), so that
    `what-if` of the file plans with the policy `plan --policy` would (read_cluster checked it)."""
    if policy is None:
        return document
    from planner.snapshot.loader import load
    from planner.snapshot.policy import is_policy

    (policy_object,) = [obj for _, obj in load([policy]).objects if is_policy(obj)]
    items = [item for item in document["items"] if not is_policy(item)]
    return {**document, "items": [*items, policy_object]}

