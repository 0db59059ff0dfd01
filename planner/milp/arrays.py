"""A MILP held as plain arrays: columns, sparse rows, objective vectors.

The formulation appends columns and rows here; solvers read the arrays (HiGHS
through `passModel`, others through PuLP). No solver is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

INF = float("inf")


@dataclass
class ModelArrays:
    col_lower: list[float] = field(default_factory=list)
    col_upper: list[float] = field(default_factory=list)
    col_integer: list[bool] = field(default_factory=list)
    col_names: list[str] = field(default_factory=list)
    row_lower: list[float] = field(default_factory=list)
    row_upper: list[float] = field(default_factory=list)
    row_names: list[str] = field(default_factory=list)
    # Row-wise sparse entries: row index, column index, coefficient.
    entry_row: list[int] = field(default_factory=list)
    entry_col: list[int] = field(default_factory=list)
    entry_val: list[float] = field(default_factory=list)
    # The entries as numpy arrays, with how many there were: converting 25M list items
    # takes seconds (XL), and a start is checked against them several times.
    _arrays: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, columns, values) as arrays, converted again only after entries were added."""
        count = len(self.entry_val)
        if self._arrays is None or self._arrays[0] != count:
            self._arrays = (count, np.asarray(self.entry_row, dtype=np.int64),
                            np.asarray(self.entry_col, dtype=np.int64), np.asarray(self.entry_val, dtype=np.float64))
        return self._arrays[1], self._arrays[2], self._arrays[3]

    @property
    def num_cols(self) -> int:
        return len(self.col_lower)

    @property
    def num_rows(self) -> int:
        return len(self.row_lower)

    def add_col(self, name: str, lower: float = 0.0, upper: float = INF, integer: bool = False) -> int:
        self.col_lower.append(lower)
        self.col_upper.append(upper)
        self.col_integer.append(integer)
        self.col_names.append(name)
        return len(self.col_lower) - 1

    def add_binary(self, name: str) -> int:
        return self.add_col(name, 0.0, 1.0, True)

    def add_row(self, name: str, terms: Iterable[tuple[int, float]], lower: float = -INF, upper: float = INF) -> int:
        """lower <= sum(coef * x[col]) <= upper; repeated columns are summed."""
        row = len(self.row_lower)
        listed = terms if isinstance(terms, list) else list(terms)
        merged = dict(listed)           # rows at scale have up to 100,000 terms: C speed first
        if len(merged) != len(listed):  # some column repeats: add its coefficients up
            merged = {}
            for col, coef in listed:
                merged[col] = merged.get(col, 0.0) + coef
        cols = sorted(merged)
        vals = [merged[col] for col in cols]
        if 0.0 in vals:
            cols = [col for col, val in zip(cols, vals) if val != 0.0]
            vals = [val for val in vals if val != 0.0]
        self.entry_row.extend([row] * len(cols))
        self.entry_col.extend(cols)
        self.entry_val.extend(vals)
        self.row_lower.append(lower)
        self.row_upper.append(upper)
        self.row_names.append(name)
        return row

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row-wise compressed arrays (start, index, value) for passModel."""
        rows, cols, vals = self.entries()
        order = np.argsort(rows, kind="stable")
        index = cols[order].astype(np.int32)
        value = vals[order]
        counts = np.bincount(rows, minlength=self.num_rows) if len(rows) else np.zeros(self.num_rows, dtype=np.int64)
        start = np.zeros(self.num_rows + 1, dtype=np.int32)
        np.cumsum(counts, out=start[1:])
        return start, index, value

    def evaluate_rows(self, values: np.ndarray) -> np.ndarray:
        """Row activities for a column vector (used to check a start before handing it over)."""
        rows, cols, vals = self.entries()
        return np.bincount(rows, weights=vals * values[cols], minlength=self.num_rows)[: self.num_rows]

    def restricted(self, free: np.ndarray, values: np.ndarray,
                   extra: Sequence[tuple[float, float, np.ndarray, np.ndarray]] = ()) -> "ModelArrays":
        """The model over the `free` columns (a mask), every other column held at its value
        in `values`: each row's bounds move by what the held columns add to it, and a row
        with no free column is left out (`values` must satisfy it). `extra` rows (lower,
        upper, columns, coefficients) count as rows of the model. Its columns are the free
        ones in order; no names."""
        rows, cols, vals = self.entries()
        lower = np.asarray(self.row_lower, dtype=np.float64)
        upper = np.asarray(self.row_upper, dtype=np.float64)
        if extra:
            first = self.num_rows
            rows = np.concatenate([rows] + [np.full(len(c), first + i, dtype=np.int64)
                                            for i, (_, _, c, _) in enumerate(extra)])
            cols = np.concatenate([cols] + [np.asarray(c, dtype=np.int64) for _, _, c, _ in extra])
            vals = np.concatenate([vals] + [np.asarray(v, dtype=np.float64) for _, _, _, v in extra])
            lower = np.concatenate([lower, [lo for lo, _, _, _ in extra]])
            upper = np.concatenate([upper, [up for _, up, _, _ in extra]])
        mine = free[cols]
        held = np.bincount(rows[~mine], weights=vals[~mine] * values[cols[~mine]], minlength=len(lower))
        kept = np.zeros(len(lower), dtype=bool)
        kept[rows[mine]] = True
        new_row = np.cumsum(kept) - 1
        columns = np.flatnonzero(free)
        new_col = np.full(len(free), -1, dtype=np.int64)
        new_col[columns] = np.arange(len(columns))
        return ModelArrays(
            col_lower=np.asarray(self.col_lower, dtype=np.float64)[columns].tolist(),
            col_upper=np.asarray(self.col_upper, dtype=np.float64)[columns].tolist(),
            col_integer=np.asarray(self.col_integer, dtype=bool)[columns].tolist(),
            row_lower=(lower - held)[kept].tolist(),     # inf less a number stays inf
            row_upper=(upper - held)[kept].tolist(),
            entry_row=new_row[rows[mine]].tolist(),
            entry_col=new_col[cols[mine]].tolist(),
            entry_val=vals[mine].tolist(),
        )
