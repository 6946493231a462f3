"""DualEval's published point fit, re-created in PyTorch as a timing reference.

This re-creates, from its published description only (Li et al. 2026), the maximum
likelihood fit of DualEval, so that ``scripts/benchmarks/benchmark.py`` can time the Bayesian fits
against it on the same data. No code of the original is used.

What it re-creates
------------------
* **Data**: read with the package's own :func:`bayes_dualeval.load`, so both sides fit
  identical rows; arena rewards are the loader's z-scores (per source, the default).
* **Pairs**: a pandas ``groupby`` over arena prompts and a plain Python loop over the
  ``C(n, 2)`` model pairs of each prompt, as the original builds them. This loop is part of
  what is timed and is deliberately *not* vectorised. A pair's soft target is
  ``sigmoid(z_i - z_j)``. Ties (``|z_i - z_j|`` at or below the 10% quantile of all
  pairwise ``|dz|``) are dropped; both-bad pairs (``max(z_i, z_j)`` at or below the 15%
  quantile of all pairwise maxima, not a tie) get the both-bad loss; the rest are decisive.
  Both quantiles are taken over all pairs before ties are dropped, as in
  :mod:`bayes_dualeval.data.distill`.
* **Model**: 2PL ``p_iq = sigmoid(a_q (theta_i - b_q))`` for static questions and arena
  prompts alike, with ``a_q = exp(log_a_q)`` (exp rather than softplus, so the ridge on
  ``log a`` is a ridge on a free parameter) and ``gamma = exp(log_gamma) > 0`` learned.
* **Loss**: mean static BCE + mean soft BCE of ``P(i beats j) = sigmoid(gamma (p_i - p_j))``
  over decisive pairs + 0.2 * mean both-bad loss ``-[log(1 - p_i) + log(1 - p_j)]`` +
  1e-3 * (sum of squares of ``theta``, ``b`` and ``log a``). A term with no rows (arena-only
  data has no static labels) is left out.
* **Optimiser**: 2000 full-batch Adam steps at learning rate 0.02, float32, on two CPU
  threads (``torch.set_num_threads(2)``, torch's default on a 2-core machine; ``--threads``
  changes it). On small data one thread is faster: on 2026-12-05 the paper-scale fit took
  3.3 s on one thread against 9.9-10.6 s on two (``scripts/benchmarks/end_to_end.py`` times both).

Time it on an idle machine. Torch's OpenMP threads spin while they wait for each other, so
when the cores are shared with other busy processes a step can take 50 times longer than
on an idle machine; ``OMP_WAIT_POLICY=PASSIVE`` in the environment (set before torch is
imported) or ``--threads 1`` avoids most of that.

What it does not re-create
--------------------------
Anything the description leaves open is a guess: initial values (``theta``, ``b`` and
``log a`` drawn from Normal(0, 0.01) with the given seed, ``gamma`` starting at 1), float32
precision, and computing ``p`` once per arena row and gathering it per pair (the cheaper
of the obvious ways, so the reference is not made slow on purpose). There is no early
stopping, no learning-rate schedule, no uncertainty, no tie-aware likelihood and none of the
original's evaluation code. Torch is not a dependency of the package: install a CPU build
(``pip install torch==2.13.0``) to run this script.

Usage::

    python scripts/references/dualeval_reference.py DATA_PATH [--steps N] [--compare RUN_DIR]

``--compare`` prints the Spearman correlation between the reference ``theta`` and the
``theta_mean`` column of ``RUN_DIR/leaderboard.csv`` (a run folder of ``bayes-dualeval
fit``). Peak RSS is that of the whole process (``resource.getrusage``), so it includes
whatever the process held before.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

TIE_RATIO = 0.10
BB_RATIO = 0.15
LAMBDA_BB = 0.2
RIDGE = 1e-3
TORCH_HINT = (
    "PyTorch is needed for the DualEval reference fit but is not installed (it is not a "
    "dependency of bayes-dualeval). Install the CPU build: pip install torch==2.13.0"
)


def _peak_rss_mib() -> float:
    """Peak resident set size of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _import_torch():
    try:
        import torch
    except ImportError as exc:
        raise ImportError(TORCH_HINT) from exc
    return torch


def build_pairs(ds, *, tie_ratio: float = TIE_RATIO, bb_ratio: float = BB_RATIO):
    """Enumerate the model pairs of every arena prompt with a Python loop, as DualEval does.

    Parameters
    ----------
    ds : bayes_dualeval.Dataset
        The loaded data.
    tie_ratio, bb_ratio : float
        Quantile levels of the tie and both-bad cut-offs.

    Returns
    -------
    pairs : pandas.DataFrame
        One row per kept pair: ``item``, ``row_i``, ``row_j`` (indices into the dataset's
        arena arrays), ``dz``, ``top`` (``max(z_i, z_j)``), ``target`` and ``both_bad``.
    n_total, n_tie : int
        Pairs before dropping ties, and ties dropped.
    """
    import numpy as np
    import pandas as pd

    arena = pd.DataFrame({"item": ds.arena_item, "model": ds.arena_model, "z": ds.arena_z})
    records = []
    for item, group in arena.groupby("item", sort=True):
        rows = group.index.tolist()
        zs = group["z"].tolist()
        n = len(rows)
        for a in range(n):
            for b in range(a + 1, n):
                dz = zs[a] - zs[b]
                records.append((item, rows[a], rows[b], dz, max(zs[a], zs[b])))
    pairs = pd.DataFrame.from_records(records, columns=["item", "row_i", "row_j", "dz", "top"])
    n_total = len(pairs)
    if n_total == 0:
        pairs["target"] = pd.Series(dtype=float)
        pairs["both_bad"] = pd.Series(dtype=bool)
        return pairs, 0, 0
    tie_thr = pairs["dz"].abs().quantile(tie_ratio) if tie_ratio > 0 else -np.inf
    bb_thr = pairs["top"].quantile(bb_ratio) if bb_ratio > 0 else -np.inf
    keep = pairs["dz"].abs() > tie_thr
    pairs = pairs.loc[keep].reset_index(drop=True)
    pairs["both_bad"] = pairs["top"] <= bb_thr
    pairs["target"] = 1.0 / (1.0 + np.exp(-pairs["dz"]))
    return pairs, n_total, int(n_total - keep.sum())


def fit(ds, pairs, *, steps: int = 2000, lr: float = 0.02, seed: int = 0):
    """Fit DualEval's point estimates with full-batch Adam in PyTorch.

    Parameters
    ----------
    ds : bayes_dualeval.Dataset
        The loaded data.
    pairs : pandas.DataFrame
        Output of :func:`build_pairs`.
    steps : int
        Adam steps.
    lr : float
        Learning rate.
    seed : int
        Seed of the initial values.

    Returns
    -------
    theta : numpy.ndarray, shape (n_models,)
        Abilities.
    gamma : float
        Arena sharpness.
    final_loss : float
        Loss at the returned parameters.
    """
    torch = _import_torch()
    import numpy as np

    torch.manual_seed(seed)
    n_models, n_items = len(ds.models), len(ds.items)
    theta = (0.01 * torch.randn(n_models)).requires_grad_()
    b = (0.01 * torch.randn(n_items)).requires_grad_()
    log_a = (0.01 * torch.randn(n_items)).requires_grad_()
    log_gamma = torch.zeros(()).requires_grad_()

    def tensor(x, dtype):
        return torch.as_tensor(np.array(x), dtype=dtype)  # a writable copy

    s_model = tensor(ds.static_model, torch.long)
    s_item = tensor(ds.static_item, torch.long)
    s_y = tensor(ds.static_y, torch.float32)
    r_model = tensor(ds.arena_model, torch.long)
    r_item = tensor(ds.arena_item, torch.long)
    bb = pairs["both_bad"].to_numpy()
    dec_i = tensor(pairs["row_i"].to_numpy()[~bb], torch.long)
    dec_j = tensor(pairs["row_j"].to_numpy()[~bb], torch.long)
    dec_t = tensor(pairs["target"].to_numpy()[~bb], torch.float32)
    bb_i = tensor(pairs["row_i"].to_numpy()[bb], torch.long)
    bb_j = tensor(pairs["row_j"].to_numpy()[bb], torch.long)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    logsig = torch.nn.functional.logsigmoid

    def loss_fn():
        a = torch.exp(log_a)
        loss = RIDGE * (theta.square().sum() + b.square().sum() + log_a.square().sum())
        if len(s_y):
            eta = a[s_item] * (theta[s_model] - b[s_item])
            loss = loss + bce(eta, s_y)
        if len(r_model):
            eta_r = a[r_item] * (theta[r_model] - b[r_item])
            if len(dec_t):
                p = torch.sigmoid(eta_r)
                x = torch.exp(log_gamma) * (p[dec_i] - p[dec_j])
                loss = loss + bce(x, dec_t)
            if len(bb_i):
                log1mp = logsig(-eta_r)  # log(1 - p), stable
                loss = loss - LAMBDA_BB * (log1mp[bb_i] + log1mp[bb_j]).mean()
        return loss

    opt = torch.optim.Adam([theta, b, log_a, log_gamma], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
    with torch.no_grad():
        final = float(loss_fn())
        gamma = float(torch.exp(log_gamma))
    return theta.detach().numpy().astype(float), gamma, final


def run_reference(
    path, *, steps: int = 2000, lr: float = 0.02, seed: int = 0, threads: int = 2
) -> dict:
    """Load, build pairs and fit, timing each phase.

    Parameters
    ----------
    path : str or Path
        Data file or folder, as for ``bayes-dualeval fit``.
    steps : int
        Adam steps (DualEval: 2000).
    lr : float
        Learning rate (DualEval: 0.02).
    seed : int
        Seed of the initial values.
    threads : int
        ``torch.set_num_threads`` (process-wide; default 2).

    Returns
    -------
    dict
        ``timings`` (seconds: ``load``, ``pairs``, ``fit``, their sum ``total``, and apart
        from it ``import``, the one-time cost of importing torch), ``theta`` (model
        label -> ability), ``gamma``, ``n_pairs`` (kept pairs), ``n_decisive``,
        ``n_both_bad``, ``n_tie``, ``final_loss`` and ``peak_rss_mib`` (process peak after
        each phase: ``load``, ``pairs``, ``fit``).

    Raises
    ------
    ImportError
        If PyTorch is not installed.
    """
    import warnings

    from bayes_dualeval import load

    # One-time library cost, timed apart: importing torch, and the first optimiser, which
    # imports torch._dynamo (seconds on a cold start).
    t_import = time.perf_counter()
    torch = _import_torch()
    torch.set_num_threads(threads)
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skip counts are the loader's business
        ds = load(path)
    t1 = time.perf_counter()
    rss = {"load": _peak_rss_mib()}
    pairs, n_total, n_tie = build_pairs(ds)
    t2 = time.perf_counter()
    rss["pairs"] = _peak_rss_mib()
    theta, gamma, final_loss = fit(ds, pairs, steps=steps, lr=lr, seed=seed)
    t3 = time.perf_counter()
    rss["fit"] = _peak_rss_mib()
    n_bb = int(pairs["both_bad"].sum())
    return {
        "timings": {
            "import": t0 - t_import,
            "load": t1 - t0,
            "pairs": t2 - t1,
            "fit": t3 - t2,
            "total": t3 - t0,
        },
        "theta": {str(m): float(v) for m, v in zip(ds.models, theta, strict=True)},
        "gamma": gamma,
        "n_pairs": len(pairs),
        "n_decisive": len(pairs) - n_bb,
        "n_both_bad": n_bb,
        "n_tie": n_tie,
        "final_loss": final_loss,
        "peak_rss_mib": rss,
        "shape": (len(ds.models), len(ds.items), len(ds.static_y), len(ds.arena_z)),
    }


def spearman_with_run(theta: dict, run_dir: str) -> tuple[float, int]:
    """Spearman correlation of ``theta`` with ``theta_mean`` of a run's leaderboard."""
    import os

    import pandas as pd
    from scipy.stats import spearmanr

    board = pd.read_csv(os.path.join(run_dir, "leaderboard.csv"))
    board = board[board["model"].astype(str).isin(theta)]
    ref = [theta[str(m)] for m in board["model"]]
    return float(spearmanr(ref, board["theta_mean"]).statistic), len(board)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="data file or folder (as for `bayes-dualeval fit`)")
    parser.add_argument("--steps", type=int, default=2000, help="Adam steps (default 2000)")
    parser.add_argument("--lr", type=float, default=0.02, help="learning rate (default 0.02)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial values")
    parser.add_argument(
        "--compare", metavar="RUN_DIR", help="run folder whose leaderboard.csv to rank against"
    )
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--top", type=int, default=5, help="models to list (default 5)")
    args = parser.parse_args(argv)
    try:
        res = run_reference(
            args.data, steps=args.steps, lr=args.lr, seed=args.seed, threads=args.threads
        )
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    n_models, n_items, n_static, n_arena = res["shape"]
    print(
        f"data: {n_models} models, {n_items} items, {n_static} static labels, "
        f"{n_arena} arena rewards"
    )
    print(
        f"pairs: {res['n_pairs']} kept ({res['n_decisive']} decisive, "
        f"{res['n_both_bad']} both-bad), {res['n_tie']} ties dropped"
    )
    print(f"\n{'phase':<8}{'seconds':>10}{'peak RSS MiB':>15}")
    for phase in ("load", "pairs", "fit"):
        print(f"{phase:<8}{res['timings'][phase]:>10.2f}{res['peak_rss_mib'][phase]:>15.0f}")
    print(f"{'total':<8}{res['timings']['total']:>10.2f}")
    print(f"(import torch, not in total: {res['timings']['import']:.2f} s)")
    print(f"\nfinal loss {res['final_loss']:.5f}, gamma {res['gamma']:.3f}")
    ranked = sorted(res["theta"].items(), key=lambda kv: -kv[1])
    for rank, (model, value) in enumerate(ranked[: args.top], 1):
        print(f"{rank:>4}  {model:<40}{value:>8.3f}")
    if args.compare:
        rho, n = spearman_with_run(res["theta"], args.compare)
        print(f"\nSpearman with {args.compare} theta_mean: {rho:.4f} ({n} models)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
