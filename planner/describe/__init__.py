"""Plans put into words and numbers: why a workload waits (reasons), what would admit it
(explain), the plan's metrics, fair-sharing report and racks board, and the comparison
with Kueue's way."""
