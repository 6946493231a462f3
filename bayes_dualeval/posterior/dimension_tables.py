"""Tables of a run with ability dimensions (``dims > 1``): abilities, loadings, labels.

The posterior holds ``theta_dims`` (draws of each model's abilities per dimension) and
``loading`` (each item's loadings, on the simplex); dimensions are numbered as
:func:`~bayes_dualeval.posterior.dimensions.align` left them (largest mean loading first).
Abilities are centred over models, as the leaderboard's are: every dimension's abilities
have the same mean over models (``theta_mean``), which the likelihood does not see.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_dualeval.core.fields import setting
from bayes_dualeval.posterior.summaries import draws_of, interval

#: Label of the items without a domain in :func:`loading_by_domain`.
NO_DOMAIN = "(no domain)"


def has_dimensions(idata) -> bool:
    """Whether a run fitted several ability dimensions (``theta_dims`` in its posterior)."""
    return "theta_dims" in idata.posterior


def loading_by_domain(idata) -> pd.DataFrame:
    """Mean loading of each domain's items on each dimension, domains x dimensions.

    Posterior means of the loadings, averaged over the items of each domain (items without
    one as :data:`NO_DOMAIN`); each row sums to one.
    """
    w = idata.posterior["loading"].mean(("chain", "draw")).values  # (Q, K)
    domain = np.asarray(idata.constant_data["item_domain"].values).astype(str)
    domain = np.where(domain == "", NO_DOMAIN, domain)
    dims = idata.posterior["dimension"].values
    frame = pd.DataFrame(w, columns=pd.Index(dims, name="dimension"))
    return frame.groupby(pd.Index(domain, name="domain")).mean()


def dimension_labels(idata) -> dict:
    """A name for each dimension from the domains that load on it most, ``{1: "math", ...}``.

    A dimension is named after the domain whose items load on it most above that
    dimension's average loading over all items; "" when no item names a domain (or no
    domain stands out). Descriptive only: the model does not use domains.
    """
    table = loading_by_domain(idata).drop(index=NO_DOMAIN, errors="ignore")
    dims = [int(d) for d in idata.posterior["dimension"].values]
    if table.empty:
        return dict.fromkeys(dims, "")
    w = idata.posterior["loading"].mean(("chain", "draw")).values
    excess = table - w.mean(axis=0)
    return {d: (str(excess[d].idxmax()) if excess[d].max() > 0 else "") for d in dims}


def abilities_table(idata, *, ci: float = 0.95) -> pd.DataFrame:
    """Each model's ability on each dimension.

    Columns: ``model, dimension, label, theta_mean, theta_sd, theta_lo, theta_hi, ci``:
    the ability centred over models (posterior mean, sd and equal-tailed interval at
    level ``ci``), the dimension's number and its :func:`dimension_labels` name. Models
    in leaderboard order (by overall ability), dimensions in order within each.
    """
    theta = draws_of(idata, "theta_dims")  # (draws, M, K)
    theta = theta - theta.mean(axis=1, keepdims=True)
    models = np.asarray(idata.posterior["model"].values)
    dims = [int(d) for d in idata.posterior["dimension"].values]
    labels = dimension_labels(idata)
    order = np.argsort(-draws_of(idata, "theta").mean(axis=0), kind="stable")
    lo, hi = interval(theta, ci)
    m, k = len(models), len(dims)
    rows = np.repeat(order, k)
    cols = np.tile(np.arange(k), m)
    return pd.DataFrame(
        {
            "model": models[rows],
            "dimension": np.array(dims)[cols],
            "label": [labels[dims[c]] for c in cols],
            "theta_mean": theta.mean(axis=0)[rows, cols],
            "theta_sd": theta.std(axis=0)[rows, cols],
            "theta_lo": lo[rows, cols],
            "theta_hi": hi[rows, cols],
            "ci": ci if theta.shape[0] > 1 else np.nan,
        }
    )


def loadings_table(idata, *, ci: float = 0.95) -> pd.DataFrame:
    """Each item's discrimination on each dimension, ``a_{q,k} = a_q w_{q,k}``.

    Columns: ``item, kind, source, domain, dimension, a_mean, a_lo, a_hi, loading_mean,
    loading_lo, loading_hi, ci``: the slope of the item on the dimension (posterior mean
    and equal-tailed interval) and its share ``w_{q,k}`` of the item's discrimination.
    Items in posterior order, dimensions in order within each.
    """
    w = draws_of(idata, "loading")  # (draws, Q, K)
    a = draws_of(idata, "a")[:, :, None] * w if "a" in idata.posterior else w
    post = idata.posterior
    items = np.asarray(post["item"].values)
    dims = np.asarray(post["dimension"].values)
    q, k = w.shape[1:]
    rows, cols = np.repeat(np.arange(q), k), np.tile(np.arange(k), q)
    a_lo, a_hi = interval(a, ci)
    w_lo, w_hi = interval(w, ci)
    return pd.DataFrame(
        {
            "item": items[rows],
            "kind": np.asarray(post["item_kind"].values)[rows],
            "source": np.asarray(post["item_source"].values)[rows],
            "domain": np.asarray(post["item_domain"].values)[rows],
            "dimension": dims[cols],
            "a_mean": a.mean(axis=0)[rows, cols],
            "a_lo": a_lo[rows, cols],
            "a_hi": a_hi[rows, cols],
            "loading_mean": w.mean(axis=0)[rows, cols],
            "loading_lo": w_lo[rows, cols],
            "loading_hi": w_hi[rows, cols],
            "ci": ci if w.shape[0] > 1 else np.nan,
        }
    )


#: A direction of the items' predictions is supported when the lower end of the 90% interval
#: of its share of their variation reaches this (:func:`dimension_support`).
MIN_SHARE = 0.05


def dimension_support(idata, *, min_share: float = MIN_SHARE) -> dict:
    """How many independent directions the fitted abilities-and-loadings actually use.

    Every cell's predictor moves with ``a_q theta_i . w_q``. For each draw, the models x items
    matrix of these products (abilities centred over models) is split into its principal
    directions; each direction's share of the matrix's variation (its squared singular
    value over their sum) says how much of what the items see it carries. On data with
    fewer real dimensions than fitted, the extra ones carry almost nothing, whether their
    abilities copy another dimension's or their items load elsewhere; such a posterior is
    a ridge that NUTS mixes poorly.

    Parameters
    ----------
    idata : arviz.InferenceData
        A run with ability dimensions (:func:`has_dimensions`).
    min_share : float
        A direction is supported when its share's 5% quantile reaches this: the data must
        show, with 95% posterior probability, that it carries at least this much (the
        burden of proof is on the extra dimension, as ``compare`` prefers the simpler of
        two fits that predict alike).

    Returns
    -------
    dict
        ``share_mean``, ``share_lo``, ``share_hi`` (lists, largest direction first;
        5% and 95% quantiles), ``supported`` (directions whose 5% quantile reaches
        ``min_share``), ``fitted`` (K) and ``min_share``.
    """
    theta = draws_of(idata, "theta_dims")  # (S, M, K)
    w = draws_of(idata, "loading")  # (S, Q, K)
    if "a" in idata.posterior:  # the discrimination vectors a_q w_q
        w = draws_of(idata, "a")[:, :, None] * w
    theta = theta - theta.mean(axis=1, keepdims=True)
    # singular values of T W^T: the square roots of the eigenvalues of (T^T T)(W^T W),
    # a K x K product per draw (both factors positive semi-definite, so they are real)
    gram = np.einsum("smk,sml->skl", theta, theta) @ np.einsum("sqk,sql->skl", w, w)
    values = np.sort(np.clip(np.linalg.eigvals(gram).real, 0.0, None), axis=1)[:, ::-1]
    share = values / np.maximum(values.sum(axis=1, keepdims=True), 1e-300)
    lo, hi = np.quantile(share, [0.05, 0.95], axis=0)
    return {
        "fitted": int(share.shape[1]),
        "supported": int(np.sum(lo >= min_share)),
        "share_mean": [round(float(v), 4) for v in share.mean(axis=0)],
        "share_lo": [round(float(v), 4) for v in lo],
        "share_hi": [round(float(v), 4) for v in hi],
        "min_share": min_share,
    }


def support_warning(support: dict) -> str | None:
    """The sentence for a :func:`dimension_support` result with unsupported directions.

    None when every fitted direction carries at least ``min_share`` of the variation.
    """
    k, used = support["fitted"], support["supported"]
    if used >= k:
        return None
    shares = ", ".join(f"{v:.0%}" for v in support["share_mean"])
    return (
        f"the data support {used} of the {k} fitted ability dimensions: the items' "
        f"predictions vary along {k} directions with shares {shares}, and "
        f"{k - used} of them may carry under {support['min_share']:.0%} (5% quantile); "
        f"extra dimensions make a ridge that mixes poorly. Compare with "
        f"{setting('dims', max(used, 1))} (bayes-dualeval compare)"
    )
