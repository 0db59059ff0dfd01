"""The real Kueue as Stowplan's peer: run Kueue v0.17.0 on a snapshot, read what it
decided, compare it with greedy and the MILP (README "Kueue as a peer").

- harness.run_kueue(path) -> PeerRun (Kueue's Decisions on the effective snapshot)
- compare.compare(snapshot, a, b) -> Comparison (agreement, disagreements; pure)
- `python -m tools.peer SNAPSHOT` runs both and prints the comparison

Importing this package imports nothing heavy; harness needs the test control plane.
"""
