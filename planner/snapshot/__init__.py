"""Snapshot readers: Kubernetes objects (as `kubectl get -o yaml/json` prints them) -> models.Snapshot.

`read_snapshot(sources, policy_file=None, now=None)` reads files or folders;
`build_snapshot(objects, source=..., ...)` does the same for objects already decoded
(the live cluster reader's way in). What the planner cannot run without (an
unreadable or malformed file, a document that is not an object, a malformed
PlannerPolicy, the same object twice) raises
planner.base.errors.InputError; every other fault becomes a models.Problem in
`Snapshot.problems` and only affects what depends on it, as in Kueue.

This package is an edge: it may import yaml (and the Kubernetes client, for the live
reader); the planner's core never imports it.
"""

from planner.k8s.quantity import QuantityError, parse_quantity
from planner.k8s.requests import effective_request
from planner.snapshot.reader import build_snapshot, read_snapshot

__all__ = ["read_snapshot", "build_snapshot", "parse_quantity", "QuantityError", "effective_request"]
