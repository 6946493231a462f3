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
