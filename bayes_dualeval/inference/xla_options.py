"""XLA's options for programs that run only a few dozen times, where compiling is their cost.

MAP's marginal objective (:mod:`bayes_dualeval.inference.mode`) is one large program, the
items' Newton solves and their third derivatives, that L-BFGS-B evaluates some fifty
times: on a CPU, XLA's compilation of it takes several times as long as all its
evaluations. XLA's older CPU emitters (``xla_cpu_use_fusion_emitters=False``) compile it
about a quarter faster and evaluate it a little slower (paper scale, 2 CPU cores, six
interleaved compilations each: a median of 6.9 s against 9.2 s, an evaluation 30-42 ms
against 25-30 ms; docs/performance.md, session 65). The NUTS and SVI programs, evaluated
hundreds of thousands of times, keep XLA's defaults.

The option is XLA's, not JAX's, and a jaxlib that does not know it refuses the whole
compilation; so it is given only where a trial compilation with it succeeds, once per
process, and only on a CPU.
"""

from __future__ import annotations

import functools

import jax

#: The options of :func:`few_calls` on a CPU.
CPU_FEW_CALLS = {"xla_cpu_use_fusion_emitters": False}


@functools.cache
def few_calls() -> dict:
    """Compiler options for a program evaluated a few dozen times (``jax.jit(compiler_options=)``).

    Returns
    -------
    dict
        :data:`CPU_FEW_CALLS` when JAX runs on a CPU and this jaxlib accepts them; else
        empty (XLA's defaults). Called at a program's first use, not at import, so that
        asking does not start JAX's backends before the host devices are set.
    """
    if jax.default_backend() != "cpu":
        return {}
    try:
        jax.jit(lambda x: x + 1, compiler_options=CPU_FEW_CALLS)(0.0).block_until_ready()
    except Exception:  # noqa: BLE001 - an unknown option is a runtime error of XLA's
        return {}
    return dict(CPU_FEW_CALLS)
