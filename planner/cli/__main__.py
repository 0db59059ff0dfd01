"""`python -m planner.cli`: the `stowplan` command (tests run it in subprocesses)."""

from planner.cli import main

main()
