"""A ModelArrays handed to HiGHS in one call (passModel with numpy arrays), quietly.

Shared by the MILP backend (planner.solve) and the relaxation's bounds (planner.bound).
"""

from __future__ import annotations

import numpy as np

from planner.model_arrays import ModelArrays


def highs_from(arrays: ModelArrays, threads: int, integral: bool = True):  # type: ignore[no-untyped-def]
    """A quiet highspy.Highs holding `arrays` (as an LP when not `integral`), zero objective.

    `threads` is set on every instance: HiGHS keeps one thread scheduler per process,
    sized by the first run, and refuses to run an instance asking for another size."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("log_to_console", False)
    h.setOptionValue("threads", max(1, threads))
    lp = highspy.HighsLp()
    lp.num_col_ = arrays.num_cols
    lp.num_row_ = arrays.num_rows
    lp.col_cost_ = np.zeros(arrays.num_cols)
    lp.col_lower_ = np.asarray(arrays.col_lower, dtype=np.float64)
    lp.col_upper_ = np.asarray(arrays.col_upper, dtype=np.float64)
    lp.row_lower_ = np.asarray(arrays.row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(arrays.row_upper, dtype=np.float64)
    start, index, value = arrays.csr()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = start
    lp.a_matrix_.index_ = index
    lp.a_matrix_.value_ = value
    lp.a_matrix_.num_col_ = arrays.num_cols
    lp.a_matrix_.num_row_ = arrays.num_rows
    if integral:
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in arrays.col_integer]
    h.passModel(lp)
    return h
