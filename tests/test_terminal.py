"""Human-facing text escapes what came from input (issue 23): no name can move the
cursor, retitle the terminal or forge a line of a table, a warning or an error."""

from __future__ import annotations

import json

from models import ObjectRef, PendingEntry, Plan, SolverReport
from planner.base.errors import VerificationError
from planner.output.document import render
from planner.base.terminal import printable, printable_lines

EVIL = "a\x1b]0;title\x07b\x1b[2J\nc\r\td\x7f\x9b\u202ee"


def test_every_control_character_is_visible():
    assert printable(EVIL) == "a\\x1b]0;title\\x07b\\x1b[2J\\nc\\r\\td\\x7f\\x9b\\u202ee"
    assert printable("plain ünïcødé names") == "plain ünïcødé names"
    assert printable_lines("one\x1b\ntwo") == "one\\x1b\ntwo"


def test_the_table_escapes_names_reasons_and_the_source():
    plan = Plan(source=f"snap{EVIL}.yaml", digest="", object_count=1,
                solver=SolverReport("greedy", "feasible", 0.0, 0.0, 0.0, message=EVIL),
                pending=(PendingEntry(ObjectRef("Job", "ns", EVIL), f"because {EVIL}"),))
    table = render(plan, "table")
    assert not any(c in table for c in "\x1b\x07\r\t\x7f\x9b\u202e")
    assert table.count("\n") == render(plan, "table").replace(EVIL, "x").count("\n")   # no forged lines
    assert "ns/a\\x1b]0;title" in table and "Job/ns/a\\x1b]0;title" in render(plan, "wide")
    assert json.loads(render(plan, "json"))["pending"][0]["workload"]["name"] == EVIL   # machines get it exact


def test_a_verification_error_keeps_one_violation_a_line():
    error = VerificationError([f"Job/ns/{EVIL}: over quota", "Job/ns/b: over quota"])
    lines = str(error).split("\n")
    assert len(lines) == 3 and "\x1b" not in str(error) and lines[1].startswith("  Job/ns/a\\x1b")
