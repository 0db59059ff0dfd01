"""The `stowplan` command: a click layer over read -> plan -> render -> write. Nothing
here decides anything.

One module per command (planner/cli/<command>.py, `what-if` in what_if.py; `bench` in
planner/tools/bench_command.py), beside what they share: group.py (the click group,
`main()`, the exit codes: the only place errors become them), options.py (parameter
types, shared options, the environment-variable rule: every flag also reads
STOWPLAN_<COMMAND>_<FLAG>, so a CronJob configures everything through env), outputs.py
(writing: atomic, all or none), console.py (stderr: progress, warnings) and
multicluster.py (a fleet planned). A new command is a module imported below.
"""

from __future__ import annotations

from planner.cli import apply, explain, generate, plan, rbac, simulate, snapshot, trace, version, what_if
from planner.cli.group import cli, main
from planner.cli.options import envvars_by_the_rule
from planner.tools.bench_command import bench_command

COMMANDS = (apply, explain, generate, plan, rbac, simulate, snapshot, trace, version, what_if)  # each joined `cli`
cli.add_command(bench_command)     # the benchmark lives among the tools
envvars_by_the_rule(cli)           # once every command has joined

__all__ = ["cli", "main"]
