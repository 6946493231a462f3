"""How NUTS chains are built and mapped, compiling as little as possible.

The kernel is initialised in one compiled program, and parallel chains take the data as an
argument of the compiled sampler.

Both adapt NumPyro's own pieces where, used as they come, they compile far more than
needed: :class:`CompiledInitNUTS` (hundreds of small programs outside ``pmap``) and
:func:`data_as_argument` (a new program for every data set under ``pmap``).
"""

from __future__ import annotations

import jax
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

    Here the initialisation is traced as one function of the key and starting values
    (the data and model configuration are closed over, as under ``pmap``), compiled once,
    and run. Its side effects on the kernel (the sample function, the model's transforms)
    happen while tracing and hold no traced values, exactly as under ``pmap``. Under a
    transformation (a traced key) it defers to ``NUTS.init`` unchanged.
    """

    def init(self, rng_key, num_warmup, init_params=None, model_args=(), model_kwargs={}):  # noqa: B006
        """``NUTS.init``, compiled as one program when called outside a transformation.

        The start (:func:`~bayes_dualeval.inference.start.init_strategy`) is derived from
        the inputs given here, traced or not, so that it is not a constant of the program.
        """
        inputs, config = model_args
        self._init_strategy = init_strategy(config, inputs)
        if isinstance(rng_key, jax.core.Tracer):
            return super().init(rng_key, num_warmup, init_params, model_args, model_kwargs)
        parent = super()

        def start(key, params):
            return parent.init(key, num_warmup, params, model_args, model_kwargs)

        return jax.jit(start)(rng_key, init_params)

    def postprocess_fn(self, model_args, model_kwargs):
        """``NUTS.postprocess_fn``, compiled.

        NumPyro calls it once eagerly, to shape the collection of draws, before the
        compiled sampling loop; uncompiled, that call runs the model primitive by primitive.
        """
        return jax.jit(super().postprocess_fn(model_args, model_kwargs))


def data_as_argument(chain_fn):
    """Chains in parallel over devices (``pmap``), the data an argument of the program.

    NumPyro's own ``"parallel"`` method maps a closure over the model's arguments, so the
    data become constants of the compiled program: every new data set, even of the same
    shape, is a new program, and the persistent compilation cache never hits. Here the
    model's inputs are passed to the mapped function (broadcast to every chain, with
    ``jit_model_args`` threading them through the sampling loop), so the program depends
    only on the shapes, the model configuration and the schedule.

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

    def one_chain(map_args, inputs, kwargs):
        return chain_fn.func(map_args, args=(inputs, config), kwargs=kwargs, **bound)

    def mapped(map_args):
        return jax.pmap(one_chain, in_axes=(0, None, None))(map_args, inputs, kwargs)

    return mapped
