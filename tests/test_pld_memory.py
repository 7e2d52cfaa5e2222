"""The grid-sized memory the core keeps between queries and within one (its query scope), and the compositions an
accountant keeps (within a byte budget): bounded, freed on request or when the scope ends, never in the results.

Reused blocks hold the previous query's numbers, so a composition that read an entry before
writing it would answer differently after another query than in a fresh state: each check
compares a query's bounds to the bit with and without kept memory from a different query, with and
without a query scope, and with every composition forgotten before the next.
"""

from __future__ import annotations

import gc
import threading

import pytest

from dpacct.pld import PLDAccountant, clear_cache, kept_memory, release_memory
from dpacct import _core
from dpacct.pld import accountant as pld_accountant

# At most 64 MiB of vectors and two workspaces of at most 32 MiB each (dpacct/cached.hpp, power.hpp).
_MOST_KEPT = (64 + 2 * 32) << 20

# (sigma, q, T, delta, relative accuracy): one grid of 2^16 points per direction; composition in
# two stages (compose_block: blocks on a fine grid, then the coarsened blocks); a split composition
# at a tiny rate; few steps at a tiny rate (one rare step).
QUERIES = [
    (4.0, 0.01, 10_000, 1e-5, 3.4e-4),
    (1.0, 1e-3, 1_000_000, 1e-5, 1e-3),
    (0.4, 1e-6, 100_000, 1e-6, 5e-3),
    (1.0, 1e-6, 3, 1e-9, 5e-3),
]


def _bounds(sigma: float, q: float, steps: int, delta: float, accuracy: float) -> tuple[float, float]:
    clear_cache()
    acct = PLDAccountant(relative_accuracy=accuracy).step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    result = acct.epsilon_bounds(delta)
    return float(result.lower), float(result.upper)


def test_release_frees_every_kept_block() -> None:
    _bounds(*QUERIES[0])
    gc.collect()  # (an accountant's compositions may sit in reference cycles until the collector runs)
    assert 0 < kept_memory() <= _MOST_KEPT
    release_memory()
    assert kept_memory() == 0


@pytest.mark.parametrize("query", QUERIES)
def test_kept_memory_does_not_change_the_answer(query: tuple[float, float, int, float, float]) -> None:
    release_memory()
    fresh = _bounds(*query)
    # Fill the kept blocks with another query's numbers (other grids, other tilts), then ask again.
    for other in QUERIES:
        if other != query:
            _bounds(*other)
    assert kept_memory() > 0
    assert _bounds(*query) == fresh
    assert kept_memory() <= _MOST_KEPT


def test_queries_in_threads_match_the_sequential_answers() -> None:
    # The bindings release the GIL while composing: two threads then take blocks and workspaces from
    # the same pools at once.
    expected = [_bounds(*query) for query in QUERIES[:2]]
    results: dict[int, tuple[float, float]] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            sigma, q, steps, delta, accuracy = QUERIES[index]
            acct = PLDAccountant(relative_accuracy=accuracy).step(
                noise_multiplier=sigma, sampling_probability=q, count=steps
            )
            result = acct.epsilon_bounds(delta)
            results[index] = (float(result.lower), float(result.upper))
        except BaseException as error:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(error)

    for _ in range(2):
        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert [results[0], results[1]] == expected


def _held(acct: PLDAccountant) -> int:
    return sum(int(c.held_bytes) for c in acct._composed_cache.values())


def test_held_bytes_counts_the_kept_vectors() -> None:
    # Seven vectors of N doubles at most (three suffix sums of the upper masses, two label sums, two shared label
    # sums): the budget of PLDAccountant._make_room counts each composition at that.
    acct = PLDAccountant().step(noise_multiplier=4.0, sampling_probability=0.01, count=10_000)
    acct.epsilon_bounds(1e-5)
    held = list(acct._composed_cache.values())
    assert held
    for composed in held:
        assert 3 * 8 * composed.size <= composed.held_bytes <= pld_accountant._KEPT_VECTORS * 8 * composed.size


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes the kept compositions hold after each _make_room (one call per composition built)."""
    made_room: list[int] = []
    original = PLDAccountant._make_room

    def spy(self: PLDAccountant, size: int) -> None:
        original(self, size)
        made_room.append(_held(self))

    monkeypatch.setattr(PLDAccountant, "_make_room", spy)
    return made_room


@pytest.mark.parametrize("query", QUERIES[:2])
def test_compositions_forgotten_do_not_change_the_answer(
    query: tuple[float, float, int, float, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    sigma, q, steps, delta, accuracy = query
    fresh = _bounds(*query)
    fresh_delta = PLDAccountant(relative_accuracy=accuracy).step(
        noise_multiplier=sigma, sampling_probability=q, count=steps
    ).delta_bounds(fresh[1])
    # A budget far below one composition: every composition is forgotten before the next is built.
    monkeypatch.setattr(pld_accountant, "_KEPT_COMPOSED_BYTES", 1 << 16)
    made_room = _count_builds(monkeypatch)
    assert _bounds(*query) == fresh
    acct = PLDAccountant(relative_accuracy=accuracy).step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    assert acct.delta_bounds(fresh[1]) == fresh_delta
    assert made_room and all(held == 0 for held in made_room)


def test_a_repeated_query_finds_its_compositions(monkeypatch: pytest.MonkeyPatch) -> None:
    # At the default budget (256 MiB with the next composition counted) grids of 2^16 points are all kept.
    made_room = _count_builds(monkeypatch)
    acct = PLDAccountant(relative_accuracy=3.4e-4).step(noise_multiplier=4.0, sampling_probability=0.01, count=10_000)
    first = acct.epsilon_bounds(1e-5)
    built = len(made_room)
    assert built >= 2 and 0 < _held(acct) <= pld_accountant._KEPT_COMPOSED_BYTES
    assert acct.epsilon_bounds(1e-5) == first
    assert len(made_room) == built


@pytest.mark.parametrize("unmatched_end_first", [False, True])
def test_a_query_scope_keeps_larger_workspaces_and_trims_them_when_it_ends(unmatched_end_first: bool) -> None:
    # A grid of 2^20 points: an FFT workspace of about 72 MB, above the 32 MiB kept between queries.
    query = (0.5, 1e-3, 100_000, 1e-6, 2e-5)
    if unmatched_end_first:
        _core.pld.hold_memory(False)  # an end without its begin changes nothing (the count stays at 0)
    release_memory()
    outside = _bounds(*query)  # (epsilon_bounds opens and closes its own scope)
    assert kept_memory() <= _MOST_KEPT
    _core.pld.hold_memory(True)
    try:
        inside = _bounds(*query)
        held = kept_memory()
    finally:
        _core.pld.hold_memory(False)
    assert inside == outside
    assert held - kept_memory() >= 32 << 20  # the workspace, kept within the scope, freed when it ended
    assert kept_memory() <= _MOST_KEPT


@pytest.mark.parametrize("query", QUERIES)
def test_the_query_scope_does_not_change_the_answer(query: tuple[float, float, int, float, float]) -> None:
    # Within a scope the compositions take blocks, workspaces and plans of any size from the ones before
    # (holding the previous numbers); without one (the undecorated method) only the between-query ones.
    sigma, q, steps, delta, accuracy = query
    scoped = _bounds(*query)
    release_memory()
    clear_cache()
    acct = PLDAccountant(relative_accuracy=accuracy).step(noise_multiplier=sigma, sampling_probability=q, count=steps)
    bare = PLDAccountant.epsilon_bounds.__wrapped__(acct, delta)  # type: ignore[attr-defined]
    assert (float(bare.lower), float(bare.upper)) == scoped

