"""Tools beside the product: generated snapshots and the benchmarks.

  generate     seeded, realistic snapshots (`stowplan generate`)
  bench        the scale benchmark and the fixture comparison (`stowplan bench`)
  peer_bench   the real Kueue beside greedy and the MILP (`stowplan bench --peer kueue`)

Reached only from the CLI's `generate` and `bench` commands; no planning step imports them.
"""
