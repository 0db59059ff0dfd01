"""Developer tools beside the planner, not part of the installed package.

They may depend on what only a checkout has (the test control plane in
tests/controlplane, binaries built by its build.sh); `planner` imports them only
lazily, from its edges (`stowplan bench --peer kueue`).
"""
