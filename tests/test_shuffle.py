"""The minibatch shuffle: a permutation, the packed rounds equal to a plain stable sort by
each round's key, enough random bits, and uniform over every ordering of a small set."""

import collections
import math

import jax
import numpy as np
import pytest

from purehr.engine.shuffle import random_permutation, shuffle_rounds


@pytest.mark.parametrize("n", [1, 2, 3, 7, 500, 4096, 10_000])
def test_is_a_permutation_and_equals_stable_sorts_by_each_rounds_key(n):
    key = jax.random.PRNGKey(n)
    permutation = np.asarray(random_permutation(key, n))
    assert permutation.dtype == np.int32
    np.testing.assert_array_equal(np.sort(permutation), np.arange(n))

    # reference: each round stably sorts the current sequence by that round's key (ties keep
    # the current order), with numpy, from the same random bits
    index_bits, rounds = shuffle_rounds(n)
    bits = np.asarray(jax.random.bits(key, (rounds, n), np.uint32))
    expected = np.arange(n)
    for round_bits in bits:
        expected = expected[np.argsort(round_bits >> index_bits, kind="stable")]
    np.testing.assert_array_equal(permutation, expected)


@pytest.mark.parametrize("n", [2, 3, 100, 4096, 10_000, 65_536, 2**20, 2**24])
def test_draws_at_least_three_log2_n_random_bits(n):
    index_bits, rounds = shuffle_rounds(n)
    assert 2**index_bits >= n
    assert rounds * (32 - index_bits) >= 3 * math.log2(n)


def test_uniform_over_the_orderings_of_four():
    draws = 24_000
    permutations = jax.jit(jax.vmap(lambda key: random_permutation(key, 4)))(
        jax.random.split(jax.random.PRNGKey(0), draws)
    )
    counts = collections.Counter(map(tuple, np.asarray(permutations).tolist()))
    assert len(counts) == 24
    expected = draws / 24
    chi_square = sum((count - expected) ** 2 / expected for count in counts.values())
    assert chi_square < 49.7  # the 0.999 quantile of chi-square with 23 degrees of freedom


def test_each_index_lands_anywhere_with_equal_chance():
    n, draws = 64, 4_000
    permutations = np.asarray(
        jax.jit(jax.vmap(lambda key: random_permutation(key, n)))(jax.random.split(jax.random.PRNGKey(1), draws))
    )
    position_of_first = np.argmax(permutations == 0, axis=1)
    counts = np.bincount(position_of_first, minlength=n)
    expected = draws / n
    chi_square = ((counts - expected) ** 2 / expected).sum()
    assert chi_square < 103.4  # the 0.999 quantile of chi-square with 63 degrees of freedom


def test_rejects_an_empty_range():
    with pytest.raises(ValueError, match="n=0"):
        random_permutation(jax.random.PRNGKey(0), 0)


def test_falls_back_to_jax_when_too_few_bits_are_left_per_round(monkeypatch):
    from purehr.engine import shuffle

    key = jax.random.PRNGKey(5)
    monkeypatch.setattr(shuffle, "MIN_KEY_BITS", 32 - shuffle.shuffle_rounds(1000)[0] + 1)
    np.testing.assert_array_equal(
        np.asarray(shuffle.random_permutation(key, 1000)), np.asarray(jax.random.permutation(key, 1000))
    )
