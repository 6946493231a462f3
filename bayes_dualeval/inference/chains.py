"""How NUTS chains are built and mapped, compiling as little as possible.

The kernel is initialised in one compiled program, and parallel chains take the data as an
argument of the compiled sampler.

Both adapt NumPyro's own pieces where, used as they come, they compile far more than
needed: :class:`CompiledInitNUTS` (hundreds of small programs outside ``pmap``) and
:func:`data_as_argument` (a new program for every data set under ``pmap``). Both pass the
kernel's starting step size and inverse mass matrix as arguments too
(:meth:`CompiledInitNUTS.starting`): NumPyro reads them from the kernel while tracing, so they
would be constants of the program, and a warm-up started from the curvature of these data
(:mod:`bayes_dualeval.inference.metric`), or a round restarted with the metric the chains
adapted, would be a new program for every data set.
"""

from __future__ import annotations

from contextlib import contextmanager

import jax
import jax.numpy as jnp
from numpyro.infer import NUTS

from bayes_dualeval.inference.start import init_strategy


class CompiledInitNUTS(NUTS):
    """NumPyro's NUTS kernel, initialised in one compiled program.

    Run outside any JAX transformation, ``NUTS.init`` (finding valid starting values,
    the model's transforms, the first step size) executes primitive by primitive, and
    each primitive is compiled as a program of its own: several hundred on this model,
    about two thirds of a short fit's time. That is where a single chain and vectorised
    chains (the path of several chains on one GPU, and of the library on a CPU with one
    device) initialise; parallel chains trace it under ``pmap`` and pay nothing.

    Here the initialisation is traced as one function of the key, the starting values, the
    data and the starting step size and metric (the model configuration is static),
    compiled once, and run; a second data set of the same shapes reuses the program. Its
    side effects on the kernel (the sample function, the model's transforms) happen while
    tracing and hold no traced values, exactly as under ``pmap``. Under a transformation
    (a traced key) it defers to ``NUTS.init`` unchanged.
    """

    def init(self, rng_key, num_warmup, init_params=None, model_args=(), model_kwargs={}):  # noqa: B006
        """``NUTS.init``, compiled as one program when called outside a transformation.

        The start (:func:`~bayes_dualeval.inference.start.init_strategy`) is derived from
        the inputs given here, traced or not, so that it is not a constant of the program.
        Compiled here, the data and the starting step size and metric
        (:meth:`start_values`) are arguments of the program.
        """
        if isinstance(rng_key, jax.core.Tracer):
            self._init_strategy = init_strategy(model_args[1], model_args[0])
            return super().init(rng_key, num_warmup, init_params, model_args, model_kwargs)
        parent = super()

        def start(key, params, args, values):
            self._init_strategy = init_strategy(args[1], args[0])  # of the traced inputs
            with self.starting(values):
                return parent.init(key, num_warmup, params, args, model_kwargs)

        return jax.jit(start)(rng_key, init_params, model_args, self.start_values())

    def postprocess_fn(self, model_args, model_kwargs):
        """``NUTS.postprocess_fn``, compiled, the data an argument.

        NumPyro calls it once eagerly, to shape the collection of draws, before the
        compiled sampling loop; uncompiled, that call runs the model primitive by primitive.
        """
        parent = super()
        compiled = jax.jit(lambda args, params: parent.postprocess_fn(args, model_kwargs)(params))
        return lambda params: compiled(model_args, params)

    def start_values(self) -> dict:
        """The starting step size and inverse mass matrix, as arrays to pass to a program.

        The metric is NumPyro's block dictionary, or None (warm-up starts from the
        identity; a program of its own).
        """
        return {
            "step_size": jnp.asarray(self._step_size, dtype=jnp.float32),
            "inverse_mass_matrix": self._inverse_mass_matrix,
        }

    @contextmanager
    def starting(self, values: dict):
        """While tracing, read the starting step size and metric from ``values``.

        ``values`` is :meth:`start_values`, as the traced arguments of the program being
        built; NumPyro's ``init`` then puts them into the first state (warm-up's step size
        and metric) instead of writing the kernel's own values into the program. The
        kernel's values are restored on exit: nothing traced outlives the trace.
        """
        saved = self._step_size, self._inverse_mass_matrix
        self._step_size, self._inverse_mass_matrix = (
            values["step_size"],
            values["inverse_mass_matrix"],
        )
        try:
            yield
        finally:
            self._step_size, self._inverse_mass_matrix = saved


def data_as_argument(chain_fn):
    """Chains in parallel over devices (``pmap``), the data an argument of the program.

    NumPyro's own ``"parallel"`` method maps a closure over the model's arguments, so the
    data become constants of the compiled program: every new data set, even of the same
    shape, is a new program, and the persistent compilation cache never hits. Here the
    model's inputs are passed to the mapped function (broadcast to every chain, with
    ``jit_model_args`` threading them through the sampling loop), and so are the kernel's
    starting step size and metric (:meth:`CompiledInitNUTS.starting`), so the program
    depends only on the shapes, the model configuration and the schedule.

    Parameters
    ----------
    chain_fn : functools.partial
        NumPyro's one-chain function, ``MCMC._single_chain_mcmc`` with its keywords bound
        (``args``, ``kwargs`` and the fields to collect).

    Returns
    -------
    callable
        Maps ``(rng_key, init_state, init_params)`` with a leading chain axis to the
        chains' output, as ``jax.pmap(chain_fn)`` does.
    """
    bound = dict(chain_fn.keywords)
    (inputs, config), kwargs = bound.pop("args"), bound.pop("kwargs")
    driver = chain_fn.func.__self__  # the MCMC driver
    kernel = driver.sampler
    # what the traced program depends on besides its arguments' shapes: the same driver
    # run again for as many draws (the chunks of a round, nuts_round.py) reuses the
    # program already traced instead of tracing the sampler anew for every run, until
    # release_programs(driver)
    key = (config, tuple(sorted(bound.items())), tuple(sorted(driver._collection_params.items())))
    programs = vars(driver).setdefault(_PROGRAMS, {})
    if key not in programs:

        def one_chain(map_args, inputs, kwargs, values):
            with kernel.starting(values):
                return chain_fn.func(map_args, args=(inputs, config), kwargs=kwargs, **bound)

        programs[key] = jax.pmap(one_chain, in_axes=(0, None, None, None))
    program = programs[key]

    def mapped(map_args):
        return program(map_args, inputs, kwargs, kernel.start_values())

    return mapped


#: Where :func:`data_as_argument` keeps a driver's mapped programs.
_PROGRAMS = "_bayes_dualeval_mapped"


def release_programs(driver) -> None:
    """Forget the mapped programs :func:`data_as_argument` kept for ``driver`` (an MCMC).

    NumPyro's own caches keep every driver alive for the life of the process, so programs
    kept on one would never be freed: the caller releases them once the driver's runs are
    over (:func:`bayes_dualeval.inference.nuts_round.one_round`, after each round).
    """
    vars(driver).pop(_PROGRAMS, None)
