"""`stowplan generate`'s options -> a GeneratorSpec: a preset of planner/tools/generate.py
or a member of the family of shapes (planner/tools/family.py), then --seed, --nodes and
each --set. Its own module because it needs both, and the family builds on the generator.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from planner.tools.family import from_options
from planner.tools.generate import GeneratorSpec, parse_setting, preset


def spec_from_options(preset_name: str, seed: int | None, nodes: str | None, settings: Sequence[str]
                      ) -> GeneratorSpec:
    """`stowplan generate`'s options -> the spec (ValueError when wrong): the preset (or the
    family's member, planner/tools/family.py), then --seed, --nodes and each --set in order."""
    pairs = []
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep:
            raise ValueError(f"--set {setting!r}: expected KEY=VALUE")
        pairs.append((key.strip(), value.strip()))
    if preset_name == "family":
        spec = from_options(seed or 0, nodes, pairs)
    else:
        spec = preset(preset_name)
        if seed is not None:
            spec = dataclasses.replace(spec, seed=seed)
        if nodes is not None:
            try:
                spec = dataclasses.replace(spec, **parse_setting(spec, "nodes", nodes))
            except ValueError as error:
                raise ValueError(f"--nodes {str(error).partition('=')[2]}") from None
        for key, value in pairs:
            try:
                spec = dataclasses.replace(spec, **parse_setting(spec, key, value))
            except ValueError as error:
                raise ValueError(f"--set {error}") from None
    spec.validate()
    return spec
