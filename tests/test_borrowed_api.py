"""What the package borrows from NumPyro's and JAX's private internals, named and checked.

The chain driver (``bayes_dualeval/inference/chains.py``) compiles NUTS's initialisation
once and passes the data and the starting metric as arguments of the parallel chains'
program. NumPyro offers no public hook for either, so it reads and writes a few private
attributes; ``api/devices.py`` asks JAX whether its backends have started. Each borrowed
name is listed in :data:`BORROWED` and checked here for the meaning the package relies
on, so that an upgrade that renames or changes one fails this file, by name, rather than
a fit somewhere else. A private attribute read anywhere else in the package fails
:func:`test_no_other_private_attribute_is_read`.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

PACKAGE = Path(__file__).resolve().parents[1] / "bayes_dualeval"

#: (file, attribute) of every private name the package reads or writes on another
#: library's object, and what it relies on.
BORROWED = {
    ("inference/chains.py", "_step_size"): "NUTS: the step size init() starts warm-up from",
    ("inference/chains.py", "_inverse_mass_matrix"): "NUTS: the metric init() starts from",
    ("inference/chains.py", "_init_strategy"): "NUTS: the strategy init() finds a start by",
    ("inference/chains.py", "_collection_params"): "MCMC: the fields a run collects",
    ("inference/chains.py", "__self__"): "MCMC: a callable chain_method gets a partial "
    "of the driver's bound one-chain method, with 'args' and 'kwargs' among its keywords",
    ("api/devices.py", "_src"): "jax._src.xla_bridge.backends_are_initialized()",
}


def _model(y=None):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


class _Seen(Exception):
    """Raised by the chain method once it has what the test reads (nothing is compiled)."""


def test_the_kernel_and_the_driver_still_have_what_the_chain_driver_borrows():
    """Two chains through a callable ``chain_method``, stopped before anything compiles."""
    kernel = NUTS(_model)
    for name in ("_step_size", "_inverse_mass_matrix", "_init_strategy"):
        assert hasattr(kernel, name), f"NumPyro's NUTS no longer has {name}"
    seen = {}

    def method(chain_fn):
        seen["fn"] = chain_fn
        raise _Seen

    mcmc = MCMC(kernel, num_warmup=5, num_samples=5, num_chains=2, chain_method=method,
                progress_bar=False, jit_model_args=True)  # fmt: skip
    assert isinstance(mcmc._collection_params, dict), "MCMC._collection_params changed"
    try:
        mcmc.run(jax.random.PRNGKey(0), jnp.zeros(3))
    except _Seen:
        pass
    fn = seen["fn"]
    assert isinstance(fn, functools.partial)
    assert fn.func.__self__ is mcmc, "the partial no longer wraps the driver's bound method"
    assert {"args", "kwargs"} <= set(fn.keywords)


def test_jax_says_whether_its_backends_started():
    from jax._src import xla_bridge

    jax.devices()
    assert xla_bridge.backends_are_initialized() is True


def test_no_other_private_attribute_is_read():
    """``x._name`` on anything but ``self``/``cls`` (and ``self._name`` of a NumPyro class)."""
    # a dotted expression ending in a private name, not rooted at self or cls (an object of
    # the package's own: ``self._run._board``)
    access = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.\w+)*)\.(_[a-z]\w*|__self__)\b")
    found = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        for line in path.read_text().splitlines():
            code = line.split("#", 1)[0]
            code = re.sub(r"``[^`]*``|`[^`]*`|\"[^\"]*\"|'[^']*'", "", code)
            for root, name in access.findall(code):
                if root.split(".")[0] not in ("self", "cls"):
                    found.add((rel, name))
    # the NumPyro subclass writes the kernel's private fields through self
    chains = (PACKAGE / "inference/chains.py").read_text()
    for name in ("_step_size", "_inverse_mass_matrix", "_init_strategy"):
        if f"self.{name}" in chains:
            found.add(("inference/chains.py", name))
    assert found == set(BORROWED), sorted(found ^ set(BORROWED))
