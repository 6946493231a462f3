# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # bayes-dualeval in a notebook
#
# Fit the bundled example, read its leaderboard and forest plot, save and reopen the run,
# then use it as a bank: score models, build a short form, predict unseen cells.
# Open it with `jupytext --to notebook docs/tutorial.py` (or run it as a script from the
# repository root). `tests/test_tutorial.py` runs it on tiny settings so it cannot rot.

# %%
import os

import bayes_dualeval as bd

# the full fit: NUTS with its defaults (about a minute on two CPU cores); the test sets
# BAYES_DUALEVAL_TUTORIAL=fast for a short SVI fit of the same data, which is only an
# approximate bank: measuring with it must be allowed explicitly, and every output says so
if os.environ.get("BAYES_DUALEVAL_TUTORIAL") == "fast":
    options = {"sampler": "svi", "svi_steps": 500, "draws": 200}
    bank = {"allow_approximate": True}
else:
    options = {"sampler": "nuts"}
    bank = {}

# %% [markdown]
# ## Fit
#
# `bd.fit` reads the files (or a folder, or DataFrames) and returns a `Run`. On a CPU it
# makes one JAX device per chain by itself. In Jupyter the run shows its leaderboard, the
# model it fitted and whether it converged.

# %%
run = bd.fit("data/", **options)
run

# %% [markdown]
# ## Read it
#
# The tables are the run folder's CSV files, as DataFrames; `run.idata` is the ArviZ
# posterior; `run.diagnostics` says whether the intervals can be trusted.

# %%
board = run.leaderboard()
board[["rank", "model", "theta_mean", "theta_lo", "theta_hi", "rank_lo", "rank_hi"]]

# %%
print(run.model, "| converged:", run.converged)
run.items().sort_values("b_mean").tail(5)[["item", "kind", "b_mean", "a_mean"]]

# %%
forest = run.plot.forest()

# %%
wright = run.plot.wright()

# %% [markdown]
# ## Save and reopen
#
# `run.save` writes the folder `bayes-dualeval fit --out` writes (tables, posterior,
# report); `bd.open` reads it back into the same kind of object.

# %%
folder = run.save("runs/tutorial")
again = bd.open(folder)
again.leaderboard()["model"].head(3).tolist()

# %% [markdown]
# ## Use it as a bank
#
# A fitted run measures models without a refit. Here the bank's own models are scored
# again as if they were new (`rescore=True`); with new evaluation files, pass their folder.
# The bank must be a converged NUTS posterior; anything else is refused unless
# `allow_approximate=True`.

# %%
scored = again.score("data/", rescore=True, **bank)
scored.scores[scored.scores["new"]].head()[["model", "theta_mean", "rank_lo", "rank_hi"]]

# %%
short = again.compress(40, **bank)  # the 40 most informative items
short.items.head()

# %%
cells = again.predict(["delta-13b", "cirrus-34b"], list(again.dataset.items[:3]), **bank)
cells.table[["model", "opponent", "item", "p_mean", "p_lo", "p_hi", "observed"]]
