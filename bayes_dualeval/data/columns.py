"""Checking columns whole: a scalar rule applied once per distinct value of a column.

The Parquet reader (:mod:`bayes_dualeval.data.parquet`) checks each column with the long
readers' scalar rules (:mod:`bayes_dualeval.data.readers`): an Arrow column is
dictionary-encoded, each distinct value passes the rule once, and every row keeps an
integer code into the results (:class:`Checked`). Needs pyarrow, imported when called.
"""

from __future__ import annotations

import numpy as np

from bayes_dualeval.data import values


class Checked:
    """One column after its rule: a code per row into the distinct values that passed.

    Attributes
    ----------
    codes : numpy.ndarray
        Per row: an index into ``values``, :attr:`ABSENT` or :attr:`INVALID`.
    values : list or numpy.ndarray
        The checked value of each distinct raw value (None where it failed).
    """

    #: Codes of a row without a value (null or empty) and of one whose value failed.
    ABSENT, INVALID = -1, -2

    def __init__(self, codes: np.ndarray, values, message):
        self.codes = codes
        self.values = values
        self._message = message

    def array(self, fill, dtype) -> np.ndarray:
        """:attr:`values` as an array of ``dtype``, ``fill`` where a value failed."""
        if isinstance(self.values, np.ndarray):  # checked as an array: nothing failed inside
            return self.values.astype(dtype, copy=False)
        return np.array([fill if v is None else v for v in self.values], dtype=dtype)

    def at(self, rows, fill, dtype) -> np.ndarray:
        """The checked value of ``rows``, ``fill`` where a row has none."""
        table = np.append(self.array(fill, dtype), np.array([fill, fill], dtype=dtype))
        return table[self.codes[rows]]  # ABSENT and INVALID index the two fills at the end

    @property
    def absent(self) -> np.ndarray:
        """Rows without a value (null or empty)."""
        return self.codes == self.ABSENT

    @property
    def invalid(self) -> np.ndarray:
        """Rows whose value failed the rule."""
        return self.codes == self.INVALID

    def message(self, row: int) -> str:
        """The rule's message for row ``row`` (from 0), whose value failed."""
        return self._message(row)


def decoded(column):
    """``column`` as one plain (non-dictionary) Arrow array."""
    import pyarrow as pa

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr


def _encoded(column):
    """``column`` as one dictionary-encoded Arrow array (as it is, when it already is one)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)


def check_column(column, rule) -> Checked:
    """Apply a scalar ``rule`` to each distinct value of an Arrow column.

    Parameters
    ----------
    column : pyarrow.Array or pyarrow.ChunkedArray
    rule : callable
        ``rule(value)`` returns the checked value or raises ``ValueError`` with the message
        the long readers give (:mod:`bayes_dualeval.data.readers`). Null and the empty
        string are absent, as in JSONL and CSV, and never reach it.

    Returns
    -------
    Checked
    """
    import pyarrow.compute as pc

    encoded = _encoded(column)
    raw = encoded.dictionary.to_pylist()
    index = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int32)
    values, messages = [None] * len(raw), [None] * len(raw)
    # the last entry: null (index -1); codes as narrow as the distinct values allow
    code = np.empty(len(raw) + 1, np.min_scalar_type(-max(len(raw), 2)))
    code[-1] = Checked.ABSENT
    for k, value in enumerate(raw):
        if value == "":
            code[k] = Checked.ABSENT
            continue
        try:
            values[k] = rule(value)
            code[k] = k
        except ValueError as exc:
            messages[k] = str(exc)
            code[k] = Checked.INVALID
    codes = code[index]
    if not (codes == Checked.INVALID).any():
        return Checked(codes, values, None)
    return Checked(codes, values, lambda row: messages[index[row]])


def numbers(column) -> Checked:
    """Rewards (and style covariates): numbers checked as arrays.

    Their distinct values are nearly every row, so they are not checked one by one; a
    column of text is checked by :func:`~bayes_dualeval.data.values.reward_field`.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = decoded(column)
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
        checked = check_column(arr, values.reward_field)
        checked.values = checked.array(np.nan, np.float64)
        return checked
    null = arr.is_null().to_numpy(zero_copy_only=False)
    value = pc.fill_null(arr.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False)
    codes = np.arange(len(value), dtype=np.int64)
    codes[~np.isfinite(value)] = Checked.INVALID
    codes[null] = Checked.ABSENT

    def message(row):
        try:
            values.reward_field(arr[row].as_py())
        except ValueError as exc:
            return str(exc)
        return f"reward must be finite, got {arr[row].as_py()!r}"

    return Checked(codes, value, message)
