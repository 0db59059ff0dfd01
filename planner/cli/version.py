"""`stowplan version`: the versions --version prints, as a command."""

from __future__ import annotations

import click

from planner.cli.group import cli, echo_versions
from planner.cli.options import CONTEXT


@cli.command("version", context_settings=CONTEXT)
def version() -> None:
    """Print Stowplan's version and those of its solver libraries."""
    echo_versions()

