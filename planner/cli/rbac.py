"""`stowplan rbac`: the RBAC a cycle needs for the policy's in-house kinds."""

from __future__ import annotations

from typing import Any

import click

from planner.cli.group import cli, exit_codes_help, exits
from planner.cli.options import CONTEXT
from planner.cli.outputs import write_stdout


@cli.command("rbac", context_settings=CONTEXT, epilog=exit_codes_help("rbac"))
@click.option("--policy", "policy", metavar="FILE", required=True, show_envvar=True,
              type=click.Path(exists=True, dir_okay=False, readable=True),
              help="The PlannerPolicy whose spec.customKinds need rights.")
@click.option("--service-account", "service_account", default="stowplan-system/stowplan", show_default=True,
              show_envvar=True, metavar="NAMESPACE/NAME", help="Who gets the rights (the CronJob's ServiceAccount).")
@exits
def rbac_command(policy: str, service_account: str) -> None:
    """Print the RBAC a cycle needs for the policy's in-house kinds (spec.customKinds).

    A ClusterRole `stowplan-planner-custom-kinds` (get, list and update on each custom
    kind's resource, as cronjob/rbac.yaml grants the built-in kinds; nothing else) and its
    ClusterRoleBinding, as YAML for `kubectl apply -f -`. With no custom kinds, an empty
    List.

    \b
    Examples:
      stowplan rbac --policy policy.yaml | kubectl apply -f -
    """
    import yaml

    from planner.kinds.custom import role_rules
    from planner.snapshot.policy import read_policy_file

    kinds = read_policy_file(policy).custom_kinds
    namespace, _, name = service_account.partition("/")
    if not namespace or not name:
        raise click.BadParameter(f"must be NAMESPACE/NAME, got {service_account!r}", param_hint="--service-account")
    objects: list[dict[str, Any]] = []
    if kinds:
        labels = {"app.kubernetes.io/name": "stowplan"}
        role = "stowplan-planner-custom-kinds"
        objects = [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": role, "labels": labels}, "rules": role_rules(kinds)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": role, "labels": labels},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
             "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        ]
    write_stdout(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}, sort_keys=False))

