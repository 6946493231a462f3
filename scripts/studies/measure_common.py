"""What score_study.py and design_study.py (scripts/studies/) share: data, fits, reporting."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

#: The shared real data (``../shared/data/real`` beside the checkout).
REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "real"


def fit_quietly(data, settings):
    """A fit of ``data`` (paths) with its warnings silenced (the studies report convergence)."""
    from bayes_dualeval import load
    from bayes_dualeval.runs.fit import fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(load(data), settings=settings)


def centred_truth(truth: dict, bank_models, models, index) -> pd.Series:
    """True abilities of ``models`` centred on the bank models' true mean, on ``index``."""
    centre = np.mean([truth["theta"][m] for m in bank_models])
    return pd.Series({m: truth["theta"][m] - centre for m in models}).reindex(index)


def progress(text: str) -> None:
    """A line on stderr, at once (long studies)."""
    print(text, file=sys.stderr, flush=True)


def finish(result: dict, out: Path | None) -> None:
    """Print the study's figures as JSON and write them to ``out`` if given."""
    from bayes_dualeval.core.atomic import write_text

    text = json.dumps(result, indent=1)
    print(text)
    if out:
        write_text(out, text + "\n")
