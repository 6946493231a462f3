"""Static answers of a bank's models on new (and common) questions, read for calibration.

:func:`item_responses` reads evaluation files with the data layer's readers (item ids
built as for a fit: ``<source>::...`` with the file's parent folder as the source) and
keeps what :func:`~bayes_dualeval.measure.calibrate.calibrate` can use: static answers of
the bank's models. Questions the bank does not hold are *new*; static questions it holds
are *common* (calibrated afresh and compared with the bank's estimate). Rows of models
the bank does not hold are left out and counted (their abilities are not on the bank's
scale), as are arena rows (calibration is of static questions) and questions fewer than
:data:`MIN_MODELS` bank models answered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayes_dualeval.core.errors import InputError
from bayes_dualeval.data.cells import static_cells
from bayes_dualeval.data.readers import read_paths

#: Fewest bank models that must have answered a question for it to be calibrated.
MIN_MODELS = 2


@dataclass(frozen=True, eq=False)
class ItemResponses:
    """The bank models' answers on the questions to calibrate, as dense matrices.

    Attributes
    ----------
    items : numpy.ndarray of str, shape (J,)
        The questions calibrated: new ones first (sorted), then common ones (sorted).
    source : numpy.ndarray of str, shape (J,)
        Each question's source (its file's parent folder).
    bank_item : numpy.ndarray of int, shape (J,)
        The bank's index of a common question, -1 for a new one.
    correct, answers : numpy.ndarray of float, shape (J, M)
        Correct answers and answers of every bank model (0 and 0 where unanswered);
        ``M`` is the bank's number of models, in its order.
    counts : dict
        Rows and questions left out: ``new_model_rows`` (and ``new_models``),
        ``arena_rows``, ``few_models_items`` (and ``few_models_rows``).
    """

    items: np.ndarray
    source: np.ndarray
    bank_item: np.ndarray
    correct: np.ndarray
    answers: np.ndarray
    counts: dict

    @property
    def new(self) -> np.ndarray:
        """Which questions are new (not in the bank)."""
        return self.bank_item < 0

    @property
    def n_models(self) -> np.ndarray:
        """Bank models that answered each question."""
        return (self.answers > 0).sum(axis=1)


def item_responses(paths, bank) -> ItemResponses:
    """Read evaluation files and keep the bank models' static answers (see the module).

    Parameters
    ----------
    paths : str, Path or list of them
        Files or folders, as :func:`bayes_dualeval.load` takes.
    bank : Bank

    Raises
    ------
    InputError
        When the data hold no static answers (arena rewards only), none of the bank's
        models, or no new or common question that at least :data:`MIN_MODELS` bank models
        answered.
    """
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    static, arena, _ = read_paths(list(paths), style=tuple(bank.dataset.style))
    if not len(static):
        raise InputError(
            f"the data hold no static answers ({len(arena)} arena rewards): calibration "
            "places new static questions on the bank's scale; arena prompts are not calibrated"
        )
    static, n, _ = static_cells(static)
    static = static.assign(n=n)
    models = pd.Index(np.asarray(bank.models, dtype=str))
    model = models.get_indexer(static["model"].astype(str))
    counts = {
        "new_model_rows": int((model < 0).sum()),
        "new_models": sorted({str(m) for m in static.loc[model < 0, "model"]}),
        "arena_rows": int(len(arena)),
    }
    if (model < 0).all():
        raise InputError(
            f"no row of the data is from a model of bank {bank.run_dir}: calibration places "
            "questions on the bank's scale through its models' abilities, so the bank's "
            f"models must answer them ({len(counts['new_models'])} other model(s) in the data)"
        )
    static, model = static.loc[model >= 0], model[model >= 0]
    items = static["item"].astype(str).to_numpy()
    bank_index = pd.Index(np.asarray(bank.dataset.items, dtype=str)).get_indexer(items)
    kind = np.asarray(bank.dataset.item_kind, dtype=str)
    arena_item = (bank_index >= 0) & (kind[np.maximum(bank_index, 0)] != "static")
    counts["arena_rows"] += int(arena_item.sum())
    frame = pd.DataFrame(
        {
            "item": items,
            "source": static["source"].astype(str).to_numpy(),
            "bank_item": bank_index,
            "model": model,
            "correct": static["correct"].to_numpy(dtype=np.float64),
            "n": static["n"].to_numpy(dtype=np.float64),
        }
    )[~arena_item]
    per_item = frame.groupby("item")["model"].nunique()
    few = per_item.index[per_item < MIN_MODELS]
    counts["few_models_items"] = int(len(few))
    counts["few_models_rows"] = int(frame["item"].isin(few).sum())
    frame = frame[~frame["item"].isin(few)]
    if not len(frame):
        raise InputError(
            f"no new or common static question that at least {MIN_MODELS} of bank "
            f"{bank.run_dir}'s models answered ({counts['few_models_items']} answered by fewer)"
        )
    first = frame.groupby("item", sort=False)[["source", "bank_item"]].first()
    first = first.assign(common=first["bank_item"] >= 0).sort_values(
        ["common", "item"], kind="stable"
    )
    row = pd.Index(first.index).get_indexer(frame["item"])
    shape = (len(first), len(models))
    correct, answers = np.zeros(shape), np.zeros(shape)
    np.add.at(correct, (row, frame["model"].to_numpy()), frame["correct"].to_numpy())
    np.add.at(answers, (row, frame["model"].to_numpy()), frame["n"].to_numpy())
    return ItemResponses(
        items=first.index.to_numpy(dtype=str),
        source=first["source"].to_numpy(dtype=str),
        bank_item=first["bank_item"].to_numpy(dtype=np.int64),
        correct=correct,
        answers=answers,
        counts=counts,
    )
