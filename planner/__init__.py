"""Stowplan's pipeline: read -> formulate -> solve -> decode -> verify -> apply."""
