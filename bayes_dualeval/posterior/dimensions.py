"""Labels of ability dimensions: the same dimension under the same number in every chain.

With ``dims = K > 1`` the model is unchanged when its dimensions are permuted (the abilities
per dimension are exchangeable a priori, and so are the loadings), so the sampler's
dimension 1 in one chain may be dimension 2 in another. That is a relabelling, not a
difference in the posterior: :func:`align` chooses, for every chain, the permutation of
its dimensions that best matches the first chain (by the chains' mean abilities and
loadings; Stephens' relabelling with a squared-error loss, applied to whole chains), then
numbers the dimensions by their mean loading, largest first. Only labels move: every draw
keeps its values. Chains are relabelled whole, never single draws: within a chain the
sampler keeps its labels unless it crosses between the permuted copies of the posterior,
and relabelling single draws where two dimensions are alike would pull them together.
A chain that does cross shows in R-hat and ESS, as it should. What was done is returned,
and the run reports it.
"""

from __future__ import annotations

import itertools

import numpy as np

from bayes_dualeval.model.contrasts import helmert_basis

#: Sites with a last axis of ability dimensions, permuted together.
DIMENSION_SITES = ("theta_dims", "theta_contrast", "loading")
#: Sites whose last axis holds the loadings' logits in Helmert coordinates (K - 1): a
#: permutation of the dimensions is an orthogonal map of them.
CONTRAST_SITES = ("mu_loading", "loading_raw")


def align(samples: dict) -> tuple[dict, dict | None]:
    """Relabel the dimensions of every chain consistently (see the module docstring).

    Parameters
    ----------
    samples : dict of str to numpy.ndarray
        Draws shaped ``(chain, draw, ...)``; ``theta_dims`` (chain, draw, M, K) and
        ``loading`` (chain, draw, Q, K) say which dimension is which, every site in
        :data:`DIMENSION_SITES` is permuted along its last axis, and those in
        :data:`CONTRAST_SITES` are mapped as the permutation maps their coordinates.

    Returns
    -------
    samples : dict
        A new dict (the input is not changed); the same object when there is no
        ``loading`` or only one dimension.
    info : dict or None
        ``chains_relabelled`` (chains whose labels were permuted to match the first),
        ``order`` (the first chain's dimension now numbered 1, 2, ...; 1-based); None
        when nothing was aligned.
    """
    if "loading" not in samples or np.shape(samples["loading"])[-1] < 2:
        return samples, None
    w = np.asarray(samples["loading"], dtype=np.float64).mean(axis=1)  # (chain, Q, K)
    theta = np.asarray(samples["theta_dims"], dtype=np.float64).mean(axis=1)  # (chain, M, K)
    k = w.shape[-1]
    # what identifies a dimension in a chain: its loadings and its centred abilities
    signature = np.concatenate([w - 1.0 / k, theta - theta.mean(axis=1, keepdims=True)], 1)
    perms = np.array(list(itertools.permutations(range(k))))  # (P, K), identity first
    cross = np.einsum("cqk,ql->ckl", signature, signature[0])  # (chain, K, K)
    choice = cross[:, perms, np.arange(k)].sum(axis=-1).argmax(axis=1)  # (chain,)
    matched = np.take_along_axis(w, perms[choice][:, None, :], axis=2).mean(axis=(0, 1))
    order = np.argsort(-matched, kind="stable")  # largest mean loading first
    final = perms[choice][:, order]  # dimension j of the output is final[c, j] of chain c
    out = dict(samples)
    for name in DIMENSION_SITES:
        if name in samples:
            value = np.asarray(samples[name])
            index = final.reshape(len(final), *([1] * (value.ndim - 2)), k)
            out[name] = np.take_along_axis(value, index, axis=-1)
    # logits u H^T permuted are u H^T[:, perm]; in Helmert coordinates, u (H^T[:, perm] H)
    h = helmert_basis(k).astype(np.float64)
    maps = np.stack([h.T[:, perm] @ h for perm in final])  # (chain, K - 1, K - 1)
    for name in CONTRAST_SITES:
        if name in samples:
            value = np.asarray(samples[name])
            moved = np.einsum("c...j,cjl->c...l", value.astype(np.float64), maps)
            out[name] = moved.astype(value.dtype)
    info = {
        "chains_relabelled": int(np.count_nonzero(choice != 0)),
        "order": [int(j) + 1 for j in order],
    }
    return out, info
