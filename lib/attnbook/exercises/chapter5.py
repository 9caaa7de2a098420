"""Exercises of chapter 5 (the Attention Free Transformer)."""

import math

import jax.numpy as jnp
import numpy as np

from attnbook import aft
from attnbook.exercises._core import Exercise, normal, register


def _qkv(rng, T, d):
    return {name: normal(rng, T, d) for name in ("q", "k", "v")}


# Random inputs have the shapes of the chapter's small example (T = 8, d = 4, AFT-conv: 2 heads and a kernel
# of 5), for which the notebook has compiled the library's functions already: the checks stay fast.

def _simple_inputs(rng):
    return {**_qkv(rng, 8, 4), "causal": bool(rng.integers(2))}


def _conv_bias_inputs(rng):
    return {"kernel": normal(rng, 2, 5), "T": 8, "causal": bool(rng.integers(2))}


def _huge(rng, *shape):
    """Entries near -1000, 0 or +1000, as in the chapter: exp overflows float32 above about 88, float64 above 709."""
    return jnp.asarray(rng.choice([-1000.0, 0.0, 1000.0], size=shape) + rng.normal(size=shape), dtype=jnp.float32)


def _stable_inputs(rng):
    T, d = 8, 4
    return {"q": normal(rng, T, d), "k": _huge(rng, T, d), "v": normal(rng, T, d), "w": _huge(rng, T, T),
            "causal": bool(rng.integers(2))}


def _late_giant():
    """Causal, T = 3: the last key is 1000 larger than the others. Shifting every row by the maximum over
    the whole sequence leaves rows 0 and 1 with terms near exp(-1000), which is 0: 0 / 0."""
    k = jnp.asarray([[0.0, 1.0], [0.5, -1.0], [1000.0, 1000.0]], dtype=jnp.float32)
    v = jnp.asarray([[1.0, -1.0], [2.0, 0.5], [-3.0, 3.0]], dtype=jnp.float32)
    return {"q": jnp.zeros((3, 2), jnp.float32), "k": k, "v": v, "w": jnp.zeros((3, 3), jnp.float32), "causal": True}


def _giant_meets_negative_bias():
    """Not causal, T = 2: the largest key (1000) meets a bias of -1000 in row 0, whose largest exponent is
    then 0. Shifting by max K + max w = 1000 underflows both terms of row 0: 0 / 0."""
    k = jnp.asarray([[1000.0], [0.0]], dtype=jnp.float32)
    v = jnp.asarray([[1.0], [-1.0]], dtype=jnp.float32)
    w = jnp.asarray([[-1000.0, 0.0], [0.0, 0.0]], dtype=jnp.float32)
    return {"q": jnp.zeros((2, 1), jnp.float32), "k": k, "v": v, "w": w, "causal": False}


# The paper's best CIFAR-10 test score (Zhai et al. 2021, Table 2: AFT-local-256, 24 blocks), in bits/dim.
CIFAR10_BITS_PER_DIM = 2.74
CIFAR10_VALUES_PER_IMAGE = 32 * 32 * 3

register(
    # 5.1 (implement): AFT-simple from Eq. 5, the softmax over time per channel, causal (a running
    # average) or not (one average for every t).
    Exercise(
        id="5.1",
        kind="function",
        reference=lambda q, k, v, causal: aft.aft_simple(q, k, v, causal=causal),
        inputs=_simple_inputs,
        cases=4,
        edge_cases=tuple({**_qkv(np.random.default_rng(51), 1, 3), "causal": c} for c in (False, True)),
    ),
    # 5.2 (derive): the (heads, T, T) banded Toeplitz bias that makes AFT-full equal AFT-conv, from the
    # kernel layout of aft_conv (causal: kernel[i, t - t']; otherwise centred, odd s); 0 outside.
    Exercise(
        id="5.2",
        kind="function",
        reference=lambda kernel, T, causal: aft.conv_bias_matrix(kernel, T, causal=causal),
        inputs=_conv_bias_inputs,
        cases=4,
        edge_cases=(
            {"kernel": jnp.asarray([[1.0, 2.0, 3.0]], jnp.float32), "T": 1, "causal": True},
            {"kernel": jnp.asarray([[1.0, 2.0, 3.0]], jnp.float32), "T": 4, "causal": True},
            {"kernel": jnp.asarray([[1.0, 2.0, 3.0]], jnp.float32), "T": 4, "causal": False},
        ),
    ),
    # 5.3 (implement): AFT-full, vectorised, stable for keys and biases near +-1000 (each row and
    # channel shifted by its own largest visible exponent, Eq. aft-shift).
    Exercise(
        id="5.3",
        kind="function",
        reference=lambda q, k, v, w, causal: aft.aft_full(q, k, v, w, causal=causal),
        inputs=_stable_inputs,
        cases=4,
        edge_cases=(_late_giant(), _giant_meets_negative_bias()),
        atol=1e-4,
    ),
    # 5.4 (derive): the paper's 2.74 bits/dim on CIFAR-10 as a negative log-likelihood in nats per
    # image (3072 values): bits/dim x 3072 x ln 2.
    Exercise(
        id="5.4",
        kind="number",
        reference=lambda: CIFAR10_BITS_PER_DIM * CIFAR10_VALUES_PER_IMAGE * math.log(2),
        rtol=1e-3,
        atol=0.0,
    ),
    # 5.5 (explore): the per-position baseline of the digits experiment without its add-one smoothing:
    # (A) a little below 2.44, (B) a little above, (C) infinite. Some (position, value) pairs of the test
    # images never occur in the training images: probability 0, -log2 0 = inf (checked in the tests).
    Exercise(
        id="5.5",
        kind="choice",
        reference=lambda: "C",
        choices=("A", "B", "C"),
    ),
)
