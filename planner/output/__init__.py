"""Plans out: the Plan document (yaml, json), tables, pictures, Prometheus text and the
simulation report."""
