"""Compiled programs are released before a process runs out of memory maps."""

import jax

from bayes_dualeval.inference import compiled


def test_programs_are_released_only_when_the_maps_are_crowded(monkeypatch):
    cleared = []
    monkeypatch.setattr(jax, "clear_caches", lambda: cleared.append(1))
    monkeypatch.setattr(compiled, "memory_maps", lambda: (200, 1000))
    assert compiled.release_if_crowded(0.25) is False and not cleared
    monkeypatch.setattr(compiled, "memory_maps", lambda: (300, 1000))
    assert compiled.release_if_crowded(0.25) is True and cleared == [1]
    # where the count cannot be read, the caller chooses
    monkeypatch.setattr(compiled, "memory_maps", lambda: None)
    assert compiled.release_if_crowded() is False and cleared == [1]
    assert compiled.release_if_crowded(unknown=True) is True and cleared == [1, 1]


def test_memory_maps_reads_this_process():
    maps = compiled.memory_maps()
    if maps is not None:  # Linux
        used, limit = maps
        assert 0 < used < limit


def test_svi_initialises_in_a_few_compiled_programs():
    """NumPyro's SVI initialisation run eagerly lowers one program per primitive of the
    model (353 on AlpacaEval, 16 of the 21 s of an SVI fit at paper scale); run_svi
    compiles it, and the draws from the guide, as one program each, and lists the sites to
    draw by an abstract trace."""
    import warnings

    from bayes_dualeval.data.dataset import Dataset
    from bayes_dualeval.data.simulate import simulate
    from bayes_dualeval.inference.settings import SamplerSettings
    from bayes_dualeval.inference.svi import run_svi
    from bayes_dualeval.model.config import load_spec
    from bayes_dualeval.model.inputs import build_inputs

    static, arena, _ = simulate(7, 23, 11, seed=5)  # shapes no other test uses
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = Dataset.from_frames(static=static, arena=arena)
    config = load_spec("dualeval-2pl")
    inputs, _ = build_inputs(ds, config)
    lowered = []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            lowered.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        settings = SamplerSettings(sampler="svi", svi_steps=20, draws=10, seed=0, progress=False)
        draws = run_svi(inputs, config, settings)
    finally:
        lowered.append(None)  # a marker: what comes after the run is not counted
        stop = getattr(jax.monitoring, "unregister_event_duration_listener", None)
        if stop is not None:  # older JAX cannot unregister; the marker bounds the count
            stop(listen)
    assert draws.samples["theta"].shape == (1, 10, 7)
    during = lowered[: lowered.index(None)]
    assert len(during) <= 40, f"{len(during)} programs lowered"  # eagerly: 427 (12 now)
