"""The model x benchmark deviation of predicted accuracy (bayes_dualeval.measure.deviation).

No fit: the bank is built from the simulator's truth (60 models x 240 questions in 4
benchmarks, a deviation of sd 0.5 per model and benchmark), its draws the true values plus
a little noise, which is all ``spread`` and ``accuracy_table`` read. Tolerances: the
spread's estimate within 0.15 of the simulated 0.5 (0.48, 0.50, 0.46 on seeds 0-2) and
below 0.15 without a deviation (0.00, 0.00, 0.13); 40 new models answering 10 questions
per benchmark, their abilities known to within 0.1: the deviation widens every
benchmark's 90% interval (mean width 0.25-0.26 against 0.17 on seeds 0-2) and the
widened intervals cover the models' true accuracy on the whole benchmark in at least 80%
of the 160 rows (0.91, 0.94, 0.88) where those without it cover fewer (0.65, 0.68, 0.66).
This is the test that fails if the deviation stops widening the interval.
"""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from bayes_dualeval.calibration.measure import static_responses
from bayes_dualeval.core.item_ids import static_ids
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.measure import deviation
from bayes_dualeval.measure.bank import Bank, _item_table
from bayes_dualeval.measure.score import accuracy_table
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.model.spec import DualEvalModel

N_BANK, N_NEW, DRAWS, PER_BENCHMARK = 60, 40, 200, 10


def truth_bank(domain_sd: float, seed: int = 0):
    """A bank whose draws are the simulator's truth plus noise, and the held-out models."""
    static, _, truth = simulate(n_models=N_BANK + N_NEW, n_static=240, n_arena=0, n_domains=4,
                                domain_sd=domain_sd, seed=seed)  # fmt: skip
    names = list(truth["theta"])
    bank_static = static[static["model_label"].isin(names[:N_BANK])]
    data = Dataset.from_frames(static=bank_static, source="bench")
    rng = np.random.default_rng(seed)
    theta = np.array([truth["theta"][m] for m in data.models])
    b = np.array([truth["items"][q]["b"] for q in data.items])
    a = np.array([truth["items"][q]["a"] for q in data.items])
    noise = lambda n: 0.05 * rng.normal(size=(DRAWS, n))  # noqa: E731
    f = np.float32
    theta_draws = theta + noise(len(theta))
    draws = dict.fromkeys(("c", "d", "gamma", "sigma", "gamma_judge", "judge_bias",
                           "style_coef"))  # fmt: skip
    draws.update(
        theta=theta_draws.astype(f),
        theta_centred=(theta_draws - theta_draws.mean(axis=1, keepdims=True)).astype(f),
        b=(b + noise(len(b))).astype(f),
        a=(a * np.exp(noise(len(a)))).astype(f),
    )
    config = dataclasses.replace(load_spec("dualeval-2pl"), mode="static")
    bank = Bank(
        run_dir=Path("truth"), model=DualEvalModel(config), dataset=data,
        items=_item_table(data), draws=draws, reward_centre={}, reward_scale={},
        tie_threshold=-np.inf, bb_threshold=-np.inf,
    )  # fmt: skip
    new = static[static["model_label"].isin(names[N_BANK:])]
    return bank, new, truth


@pytest.fixture(scope="module")
def deviating():
    return truth_bank(0.5)


def test_the_spread_is_estimated_from_the_bank(deviating):
    bank, *_ = deviating
    assert abs(deviation.spread(bank) - 0.5) < 0.15
    flat, *_ = truth_bank(0.0)
    assert deviation.spread(flat) < 0.15


def test_the_deviation_widens_the_interval_and_covers(deviating):
    bank, new, truth = deviating
    ids = bank.dataset.items
    index = {q: k for k, q in enumerate(ids)}
    item = np.array([index[q] for q in static_ids("bench", new["dataset"], new["sample_index"])])
    models = sorted(new["model_label"].unique())
    model = np.searchsorted(models, new["model_label"].to_numpy())
    bench = bank.items["dataset"].to_numpy(dtype=str)
    label = {m: f"sim{k}" for k, m in enumerate(models)}  # static_responses' names
    frame = new.assign(dataset=bench[item], model=new["model_label"].map(label))
    full = frame.groupby(["model", "dataset"])["correct"].mean()
    # a short form: the first PER_BENCHMARK questions of each benchmark
    short = new["sample_index"].to_numpy() < PER_BENCHMARK
    resp = static_responses(N_NEW, model[short], item[short], new["correct"].to_numpy()[short])
    rng = np.random.default_rng(1)
    theta = np.array([truth["theta"][m] for m in models])[:, None] + 0.1 * rng.normal(
        size=(N_NEW, DRAWS)
    )
    tau = deviation.spread(bank)
    tables = {
        name: accuracy_table(bank, resp, theta, 0.9, np.random.default_rng(2), tau=t)
        .set_index(["model", "dataset"])
        .drop("all", level="dataset")
        for name, t in (("with", tau), ("without", 0.0))
    }
    width = {k: t["predicted_hi"] - t["predicted_lo"] for k, t in tables.items()}
    assert (width["with"] >= width["without"] - 0.02).all()
    assert width["with"].mean() > 1.2 * width["without"].mean()
    cover = {}
    for name, t in tables.items():
        true = full.reindex(t.index)
        cover[name] = float(((t["predicted_lo"] <= true) & (true <= t["predicted_hi"])).mean())
    assert cover["with"] >= 0.8
    assert cover["with"] > cover["without"]
