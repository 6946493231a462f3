"""Write the bundled example's item-feature file, ``data/items.features.csv``.

The bundled example is simulated (``data/truth.json``), so its items have no text to embed.
The file holds what a user could have without a language model, for each of the 400 items:

* ``rated_difficulty``: a rater's difficulty score, simulated as the true difficulty plus
  independent noise of the same spread (so it carries about half of the difficulty's
  variance: correlation about 0.7), rounded to one decimal;
* ``domain_math``, ``domain_code``: domain dummies (``writing`` is the baseline).

Run from the repository root::

    python scripts/tools/bundled_features.py          # rewrites data/items.features.csv
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]


def bundled_features(truth: dict, seed: int = 2026) -> pd.DataFrame:
    """The feature table of the items in ``truth`` (see the module docstring)."""
    items = truth["items"]
    ids = list(items)
    b = np.array([items[q]["b"] for q in ids])
    domain = np.array([items[q]["domain"] for q in ids])
    rng = np.random.default_rng(seed)
    rated = b + rng.normal(0.0, b.std(), len(b))
    return pd.DataFrame(
        {
            "item": ids,
            "rated_difficulty": np.round(rated, 1),
            "domain_math": (domain == "math").astype(int),
            "domain_code": (domain == "code").astype(int),
        }
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data")
    args = parser.parse_args(argv)
    truth = json.loads((args.data / "truth.json").read_text())
    out = args.data / "items.features.csv"
    table = bundled_features(truth)
    table.to_csv(out, index=False)
    share = np.corrcoef(table["rated_difficulty"], [truth["items"][q]["b"] for q in table["item"]])
    print(f"wrote {out}: {len(table)} items; corr(rated, b) = {share[0, 1]:.2f}")


if __name__ == "__main__":
    main()
