"""Chapter 12: linear attention and its descendants, each computed three ways that give the same numbers.

One head, rows as tokens, no softmax. Every model here is **masked linear attention**::

    O = (Q K^T  *  L) V                                        (the parallel masked form)

with a ``T x T`` lower-triangular *decay mask* ``L`` (``L[t, s] = 0`` for ``s > t``), and, because no softmax
couples the scores of a row, the same numbers come from a state ``S`` of shape ``(dk, dv)`` carried from token
to token (rows as tokens: ``S`` maps a query row to an output row)::

    S_t = a_t S_{t-1} + k_t^T v_t,     o_t = q_t S_t           (the recurrent form)

with ``a_t = exp(g_t)`` the decay of step ``t``, ``L[t, s] = a_{s+1} ... a_t = exp(g_{s+1} + ... + g_t)``
(:func:`decay_mask`, Mamba-2's ``segsum``), and ``O(T dk dv)`` work instead of ``O(T^2 (dk + dv))``. The chunked
form cuts the sequence into blocks of ``chunk`` tokens: inside a block the parallel form, across blocks the state
(as flash-linear-attention's and Mamba-2's reference code do). ``T`` need not be a multiple of ``chunk``: the last
block is padded with keys and values of 0 and decay 1, which add nothing to any state, and the padded rows are
dropped.

The models, all with ``form="parallel" | "chunked" | "recurrent"``:

``linear_attention``  Katharopoulos et al. (2020): ``g = 0`` (no decay) after a feature map ``phi`` (``elu + 1``)
                      on queries and keys; ``normalize=True`` divides by ``phi(q_t) . sum_{s<=t} phi(k_s)``,
                      computed as one more value column of ones.
``retention``         RetNet (Sun et al. 2023): a fixed decay ``gamma`` per head, ``L[t, s] = gamma^(t - s)``.
``ssd``               Mamba-2 (Dao & Gu 2024): the scalar decay ``exp(a_t)`` depends on the input; queries are
                      ``C``, keys ``B``, values ``X`` (already multiplied by ``dt``), the mask is
                      1-semiseparable (their Listing 1).
``delta_rule``        DeltaNet (Schlag et al. 2021; Yang et al. 2024): the state is *corrected* towards ``v_t``
                      at key ``k_t`` with rate ``beta_t`` instead of added to: ``S_t = S_{t-1} + beta_t k_t^T
                      (v_t - k_t S_{t-1})``; ``log_decay=`` multiplies ``S_{t-1}`` by ``exp(g_t)`` first
                      (Gated DeltaNet, Yang, Kautz & Hatamizadeh 2024). Its parallel form is masked linear
                      attention on the *pseudo-values* ``U = (I + tril(diag(beta) (K K^T * L), -1))^{-1}
                      diag(beta) V``: a triangular solve, so the mask acts through a ``T x T`` inverse.
``rwkv``              RWKV-4's WKV (Peng et al. 2023): per channel, a decay ``w > 0`` and a bonus ``u`` for the
                      current token; normalised like AFT. Its parallel form is chapter 5's :func:`aft.aft_full`
                      with the bias ``w[t, s] = -(t - 1 - s) w`` below the diagonal and ``u`` on it
                      (:func:`rwkv_bias`), which is how the chapter connects the two.

The connection to chapter 5: AFT-full with a causal bias ``w[t, s] = (t - s) log gamma`` is the ratio of two
retentions with query 1, key ``exp(K)`` and values ``V`` and 1, channel by channel, gated by ``sigmoid(Q)``;
AFT-simple is the case ``gamma = 1``: :func:`aft_as_retention` computes it that way (and the tests check it).

Non-finite input (NaN or an infinity in a query, key, value, decay or rate) makes NaN exactly the outputs that
see it, in every form: output ``t`` for a query at ``t``, outputs ``t >= s`` for the rest at ``s`` (channel by
channel for :func:`rwkv`); earlier outputs and their gradients stay finite. ``T = 0`` gives an empty output.

Scaling is the caller's: no function here divides by ``sqrt(dk)``. Of the rules of :class:`LinearAttention`, only
``"retention"`` and ``"decay"`` scale their queries by ``key_dim ** -0.5``, as RetNet does; its delta rules do not,
where flash-linear-attention's kernels default to ``scale = K ** -0.5``.
Shapes are the jaxtyping annotations (checked at trace time, so under ``jax.jit`` too); ``form``, ``chunk``,
``normalize`` and a Python ``gamma`` (in ``(0, 1]``) are checked. Decays and rates given as arrays are not
range-checked: ``log_decay <= 0`` and ``beta`` in ``[0, 1]`` are the models' ranges, and a value outside them is
another model (a state that grows), which every form computes alike.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import _checks, nn
from .aft import aft_full

FORMS = ("parallel", "chunked", "recurrent")
RULES = ("linear", "retention", "decay", "delta", "gated-delta", "ssd")


def _form(form: str) -> str:
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    return form


def _same_dtype(*arrays):
    dtype = jnp.result_type(*arrays)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.float32
    return tuple(jnp.asarray(a, dtype=dtype) for a in arrays)


# ---------------------------------------------------------------------------------------------
# The decay mask, from the recurrence


@_checks.shaped
def segsum(g: Float[Array, "T"]) -> Float[Array, "T T"]:
    """``out[t, s] = g[s+1] + ... + g[t]`` for ``s <= t`` (0 on the diagonal), ``-inf`` above it.

    Mamba-2's stable ``segsum``: each entry is a sum of the terms between ``s`` and ``t`` themselves, not a
    difference of two prefix sums (which loses the small ones to rounding when the prefix sums are large).
    """
    length = g.shape[0]
    below = jnp.asarray(np.tril(np.ones((length, length), dtype=bool), -1))
    summed = jnp.cumsum(jnp.where(below, g[:, None], 0.0), axis=0)  # column s: sum of g[s+1 .. t]
    return jnp.where(jnp.asarray(np.tril(np.ones((length, length), dtype=bool))), summed, -jnp.inf)


@_checks.shaped
def decay_mask(log_decay: Float[Array, "T"]) -> Float[Array, "T T"]:
    """The decay mask ``L[t, s] = exp(g[s+1] + ... + g[t])`` for ``s <= t`` and 0 above the diagonal.

    It is what the recurrence ``S_t = exp(g_t) S_{t-1} + k_t^T v_t`` does to the key and value of step ``s`` by
    step ``t``: ``exp(segsum(g))``. A constant ``g = log gamma`` gives RetNet's ``gamma^(t - s)``; ``g = 0`` the
    causal mask of linear attention.
    """
    return jnp.exp(segsum(log_decay))


# ---------------------------------------------------------------------------------------------
# The one computation behind every model: masked linear attention, with or without the delta rule


def _pseudo_values(k, v, beta, mask, start=None):
    """The delta rule's ``U = (I + tril(diag(beta) (K K^T * L), -1))^{-1} diag(beta) (V - start)``."""
    lower = jnp.tril(beta[:, None] * (k @ k.T) * mask, -1)
    rhs = beta[:, None] * (v if start is None else v - start)
    return _unit_lower_solve(lower, rhs)


def _unit_lower_solve(lower, rhs):
    """``x`` with ``(I + lower) x = rhs`` for a strictly lower-triangular ``lower``: forward substitution, row by row.

    Not ``jax.scipy.linalg.solve_triangular``: under ``vmap`` on the CPU its LAPACK kernel splits the batch over XLA's
    thread pool and waits for the parts (jaxlib 0.10.2), and two such solves running at once on a 2-thread pool have
    each waited forever for the other's thread (chapter 12's training, 2 runs in 3). A ``scan`` adds no custom call.
    """
    def row(x, t):  # rows t.. of x are still 0, so lower[t] @ x sums over s < t only
        return x.at[t].set(rhs[t] - lower[t] @ x), None

    x, _ = jax.lax.scan(row, jnp.zeros_like(rhs), jnp.arange(rhs.shape[0]))
    return x


def _parallel(q, k, v, g, beta):
    mask = decay_mask(g)
    u = v if beta is None else _pseudo_values(k, v, beta, mask)
    return ((q @ k.T) * mask) @ u


def _recurrent(q, k, v, g, beta, state=None):
    def step(s, inputs):
        q_t, k_t, v_t, g_t, b_t = inputs
        s = jnp.exp(g_t) * s
        u_t = v_t if beta is None else b_t * (v_t - k_t @ s)
        s = s + jnp.outer(k_t, u_t)
        return s, q_t @ s

    start = jnp.zeros((k.shape[1], v.shape[1]), v.dtype) if state is None else jnp.asarray(state, v.dtype)
    b = jnp.zeros_like(g) if beta is None else beta
    final, out = jax.lax.scan(step, start, (q, k, v, g, b))
    return out, final


def _chunked(q, k, v, g, beta, chunk):
    length = q.shape[0]
    pad = -length % chunk
    padded = lambda x: jnp.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1))
    blocks = lambda x: padded(x).reshape((-1, chunk) + x.shape[1:])
    b = jnp.zeros_like(g) if beta is None else beta

    def one_block(s, inputs):
        q_c, k_c, v_c, g_c, b_c = inputs
        mask = decay_mask(g_c)  # inside the block
        from_start = jnp.exp(jnp.cumsum(g_c))  # a_{c0} ... a_t: what the block has done to the state by row t
        if beta is None:
            u = v_c
        else:  # the state entering the block is already part of every prediction k_t S_{t-1}
            u = _pseudo_values(k_c, v_c, b_c, mask, start=from_start[:, None] * (k_c @ s))
        out = from_start[:, None] * (q_c @ s) + ((q_c @ k_c.T) * mask) @ u
        to_end = mask[-1]  # a_{s+1} ... a_{last}: what the rest of the block does to row s's key and value
        s = from_start[-1] * s + (to_end[:, None] * k_c).T @ u
        return s, out

    start = jnp.zeros((k.shape[1], v.shape[1]), v.dtype)
    _, out = jax.lax.scan(one_block, start, tuple(blocks(x) for x in (q, k, v, g, b)))
    return out.reshape((-1, v.shape[1]))[:length]


def _masked_linear(q, k, v, g, beta, form, chunk):
    if beta is None:
        q, k, v, g = _same_dtype(q, k, v, g)
    else:
        q, k, v, g, beta = _same_dtype(q, k, v, g, beta)
    if q.shape[0] == 0:
        return jnp.zeros(v.shape, v.dtype)
    # Non-finite input is set to 0 before the arithmetic and NaN put back into exactly the outputs that see it
    # (query t; keys, values, decays and rates s <= t): a product with a zero of the mask would spread it.
    rows = lambda x: ~jnp.isfinite(x) if x.ndim == 1 else jnp.any(~jnp.isfinite(x), axis=1)
    written = rows(k) | rows(v) | rows(g) | (False if beta is None else rows(beta))
    poisoned = (jnp.cumsum(written, dtype=jnp.int32) > 0) | rows(q)
    clean = lambda x, bad: jnp.where(bad if x.ndim == 1 else bad[:, None], jnp.zeros((), x.dtype), x)
    q, k, v, g = clean(q, rows(q)), clean(k, written), clean(v, written), clean(g, written)
    beta = None if beta is None else clean(beta, written)
    if form == "parallel":
        out = _parallel(q, k, v, g, beta)
    elif form == "recurrent":
        out = _recurrent(q, k, v, g, beta)[0]
    else:
        out = _chunked(q, k, v, g, beta, chunk)
    return jnp.where(poisoned[:, None], jnp.asarray(jnp.nan, out.dtype), out)


def _chunk(form, chunk):
    form = _form(form)
    return form, _checks.positive_int("chunk", chunk)


@functools.partial(jax.jit, static_argnames=("form", "chunk"))
def _decayed(q, k, v, g, beta, form, chunk):
    return _masked_linear(q, k, v, g, beta, form, chunk)


@_checks.shaped
def decayed_linear_attention(q: Float[Array, "T dk"], k: Float[Array, "T dk"], v: Float[Array, "T dv"],
                             log_decay: Float[Array, "T"], *, form: str = "chunked",
                             chunk: int = 16) -> Float[Array, "T dv"]:
    """``O = (Q K^T * decay_mask(log_decay)) V``: step ``t`` multiplies the state by ``exp(log_decay[t])``.

    The three forms (``form``): the ``T x T`` masked product; blocks of ``chunk`` tokens with the state across
    them; a scan, one state update ``S_t = exp(g_t) S_{t-1} + k_t^T v_t``, ``o_t = q_t S_t`` per token.
    """
    form, chunk = _chunk(form, chunk)
    q, k, v, log_decay = _same_dtype(q, k, v, log_decay)
    return _decayed(q, k, v, log_decay, None, form, chunk)


def elu_plus_one(x):
    """Katharopoulos et al.'s feature map ``phi(x) = elu(x) + 1``, positive everywhere."""
    return jax.nn.elu(x) + 1.0


@_checks.shaped
def linear_attention(q: Float[Array, "T dk"], k: Float[Array, "T dk"], v: Float[Array, "T dv"], *,
                     feature_map=elu_plus_one, normalize: bool = True, form: str = "chunked",
                     chunk: int = 16) -> Float[Array, "T dv"]:
    """Causal linear attention (Katharopoulos et al. 2020, with their ``elu + 1`` feature map):

    ``o_t = phi(q_t) sum_{s<=t} phi(k_s)^T v_s / (phi(q_t) . sum_{s<=t} phi(k_s))`` with ``normalize`` (the
    paper), without the denominator otherwise (as flash-linear-attention's default). ``feature_map=None``
    uses ``q`` and ``k`` as they are. The denominator is one more value column of ones, carried by the same
    state, so each form computes both at once.
    """
    form, chunk = _chunk(form, chunk)
    normalize = _checks.flag("normalize", normalize)
    q, k, v = _same_dtype(q, k, v)
    if feature_map is not None:
        feature_map = _checks.function("feature_map", feature_map)
        q, k = feature_map(q), feature_map(k)
    g = jnp.zeros(q.shape[:1], q.dtype)
    if not normalize:
        return _decayed(q, k, v, g, None, form, chunk)
    both = _decayed(q, k, jnp.concatenate([v, jnp.ones_like(v[:, :1])], axis=1), g, None, form, chunk)
    return both[:, :-1] / both[:, -1:]


def _gamma(gamma):
    gamma = _checks.positive_float("gamma", gamma) if not hasattr(gamma, "shape") else gamma
    if not hasattr(gamma, "shape") and gamma > 1.0:
        raise ValueError(f"gamma must be a decay in (0, 1], got {gamma!r}")
    return gamma


@_checks.shaped
def retention(q: Float[Array, "T dk"], k: Float[Array, "T dk"], v: Float[Array, "T dv"], gamma, *,
              form: str = "chunked", chunk: int = 16) -> Float[Array, "T dv"]:
    """RetNet's retention, one head: ``O = (Q K^T * D) V`` with ``D[t, s] = gamma^(t - s)`` for ``s <= t``.

    ``gamma`` is a number in ``(0, 1]`` or a scalar array (a learned decay, e.g. ``sigmoid`` of a
    parameter). RetNet's multi-scale heads use ``gamma_h = 1 - 2^(-5 - h)``; its ``1/sqrt(dk)`` is the
    caller's (see the module's docstring).
    """
    form, chunk = _chunk(form, chunk)
    gamma = _gamma(gamma)
    q, k, v = _same_dtype(q, k, v)
    g = jnp.full(q.shape[:1], jnp.log(jnp.asarray(gamma, q.dtype)), q.dtype)
    return _decayed(q, k, v, g, None, form, chunk)


@_checks.shaped
def ssd(x: Float[Array, "T p"], a: Float[Array, "T"], b: Float[Array, "T n"], c: Float[Array, "T n"], *,
        form: str = "chunked", chunk: int = 16) -> Float[Array, "T p"]:
    """Mamba-2's state-space duality, one head: the selective SSM ``h_t = exp(a_t) h_{t-1} + b_t^T x_t``,
    ``y_t = c_t h_t`` is masked linear attention with queries ``C``, keys ``B``, values ``X`` and the
    1-semiseparable mask ``exp(segsum(a))``.

    In Mamba-2's terms ``x`` is ``X * dt`` and ``a`` is ``A * dt`` (``A < 0``, ``dt > 0``), the arguments of
    ``ssd_minimal_discrete`` (Listing 1 of Dao & Gu 2024); ``p`` is the head dimension, ``n`` the state size.
    """
    form, chunk = _chunk(form, chunk)
    x, a, b, c = _same_dtype(x, a, b, c)
    return _decayed(c, b, x, a, None, form, chunk)


@_checks.shaped
def delta_rule(q: Float[Array, "T dk"], k: Float[Array, "T dk"], v: Float[Array, "T dv"], beta: Float[Array, "T"],
               log_decay: Float[Array, "T"] | None = None, *, form: str = "chunked",
               chunk: int = 16) -> Float[Array, "T dv"]:
    """The delta rule (DeltaNet), and with ``log_decay`` the gated delta rule (Gated DeltaNet), one head.

    Recurrent form: ``S = exp(g_t) S``; ``u_t = beta_t (v_t - k_t S)`` (the error of the state's prediction at
    ``k_t``, times the learning rate ``beta_t``); ``S = S + k_t^T u_t``; ``o_t = q_t S``. One step of gradient
    descent on ``|k_t S - v_t|^2 / 2`` per token. DeltaNet normalises keys to unit length (then ``beta_t = 1``
    overwrites the value stored at ``k_t``); that is the layer's job. Parallel form: masked linear attention on
    the pseudo-values ``U`` (see the module's docstring), found with one triangular solve; the chunked form does
    one ``chunk x chunk`` solve per block, inside the scan over blocks, because its right-hand side holds the state
    entering the block. Both solves are forward substitution, one row after another: ``T`` sequential row steps in
    either form. (Yang et al. 2024's WY representation, as flash-linear-attention computes it, instead finds each
    block's ``W`` and ``U`` from the block's keys, values and rates alone, in parallel across blocks, so that only
    the state and ``U - W S`` run block after block; the numbers are the same.)
    """
    form, chunk = _chunk(form, chunk)
    g = jnp.zeros_like(beta) if log_decay is None else log_decay
    q, k, v, beta, g = _same_dtype(q, k, v, beta, g)
    return _decayed(q, k, v, g, beta, form, chunk)


def gated_delta_rule(q, k, v, beta, log_decay, *, form: str = "chunked", chunk: int = 16):
    """Gated DeltaNet's rule: :func:`delta_rule` with the decay ``exp(log_decay[t])`` of the state at every step."""
    if log_decay is None:
        raise TypeError("log_decay must be an array of shape (T,), got None (use delta_rule without a gate)")
    return delta_rule(q, k, v, beta, log_decay, form=form, chunk=chunk)


# ---------------------------------------------------------------------------------------------
# RWKV: a decayed, normalised form that is AFT-full with a decay bias


@_checks.shaped
def rwkv_bias(decay: Float[Array, ""], bonus: Float[Array, ""], length: int) -> Float[Array, "T T"]:
    """The ``(T, T)`` AFT bias of RWKV-4's WKV with one channel's ``decay`` ``w`` and ``bonus`` ``u``:

    ``-(t - 1 - s) w`` for ``s < t``, ``u`` for ``s = t``, ``-inf`` above the diagonal (``T = length``).
    """
    length = _checks.nonnegative_int("length", length)
    offset = jnp.asarray(np.subtract.outer(np.arange(length), np.arange(length)))  # t - s
    below = -(offset - 1) * decay
    return jnp.where(offset > 0, below, jnp.where(offset == 0, bonus, -jnp.inf))


@functools.partial(jax.jit, static_argnames=("form", "chunk"))
def _rwkv(k, v, w, u, form, chunk):
    length, d = k.shape
    if length == 0:
        return jnp.zeros_like(v)
    if form == "parallel":  # chapter 5's AFT-full, one channel at a time, without its sigmoid(Q) gate
        one = lambda k_c, v_c, w_c, u_c: aft_full(jnp.full((length, 1), jnp.inf, k.dtype), k_c[:, None], v_c[:, None],
                                                   rwkv_bias(w_c, u_c, length), causal=True)[:, 0]
        return jax.vmap(one, in_axes=(1, 1, 0, 0), out_axes=1)(k, v, w, u)
    if form == "recurrent":  # the reference's stable recurrence: (a, b) scaled by exp(-p), p a running maximum
        def step(carry, inputs):
            a, b, p = carry
            k_t, v_t = inputs
            top = jnp.maximum(p, u + k_t)
            e1, e2 = jnp.exp(p - top), jnp.exp(u + k_t - top)
            out = (e1 * a + e2 * v_t) / (e1 * b + e2)
            top = jnp.maximum(p - w, k_t)
            e1, e2 = jnp.exp(p - w - top), jnp.exp(k_t - top)
            return (e1 * a + e2 * v_t, e1 * b + e2, top), out

        start = (jnp.zeros((d,), v.dtype), jnp.zeros((d,), v.dtype), jnp.full((d,), -jnp.inf, k.dtype))
        return jax.lax.scan(step, start, (k, v))[1]
    # chunked: inside a block the exponents k_s - (t - 1 - s) w and u + k_t, across blocks the scaled state
    pad = -length % chunk
    valid = jnp.pad(jnp.ones((length,), bool), (0, pad)).reshape(-1, chunk)
    kb = jnp.pad(k, ((0, pad), (0, 0))).reshape(-1, chunk, d)
    vb = jnp.pad(v, ((0, pad), (0, 0))).reshape(-1, chunk, d)
    j = jnp.arange(chunk, dtype=k.dtype)
    offset = j[:, None] - j[None, :]  # t - s inside the block

    def one_block(carry, inputs):
        a, b, p = carry  # sum over s < block start of exp(k_s - (start - 1 - s) w) [v_s, 1] = exp(p) [a, b]
        k_c, v_c, ok = inputs
        z = jnp.where(offset[..., None] > 0, k_c[None] - (offset[..., None] - 1) * w, u + k_c[None])  # (t, s, d)
        z = jnp.where((offset[..., None] >= 0) & ok[None, :, None], z, -jnp.inf)
        before = p - j[:, None] * w  # the state's exponent as seen from row t: decayed t more steps
        top = jax.lax.stop_gradient(jnp.maximum(jnp.max(z, axis=1), before))
        top = jnp.where(jnp.isfinite(top), top, 0.0)
        e, e0 = jnp.exp(z - top[:, None]), jnp.exp(before - top)
        out = (e0 * a + jnp.einsum("tsd,sd->td", e, v_c)) / (e0 * b + jnp.sum(e, axis=1))
        # the state after the block: every valid key, decayed to the block's end
        zs = jnp.where(ok[:, None], k_c - (chunk - 1 - j)[:, None] * w, -jnp.inf)
        new_p = jax.lax.stop_gradient(jnp.maximum(jnp.max(zs, axis=0), p - chunk * w))
        new_p = jnp.where(jnp.isfinite(new_p), new_p, -jnp.inf)
        es, es0 = jnp.exp(zs - jnp.where(jnp.isfinite(new_p), new_p, 0.0)), jnp.exp(p - chunk * w - new_p)
        es0 = jnp.where(jnp.isfinite(new_p), es0, 0.0)
        return (es0 * a + jnp.sum(es * v_c, axis=0), es0 * b + jnp.sum(es, axis=0), new_p), out

    start = (jnp.zeros((d,), v.dtype), jnp.zeros((d,), v.dtype), jnp.full((d,), -jnp.inf, k.dtype))
    return jax.lax.scan(one_block, start, (kb, vb, valid))[1].reshape(-1, d)[:length]


@_checks.shaped
def rwkv(k: Float[Array, "T d"], v: Float[Array, "T d"], decay: Float[Array, "d"], bonus: Float[Array, "d"], *,
         form: str = "chunked", chunk: int = 16) -> Float[Array, "T d"]:
    """RWKV-4's WKV operator, channel by channel (Peng et al. 2023; BlinkDL/ChatRWKV's ``RWKV_in_150_lines.py``):

    ``wkv_t = (sum_{s<t} exp(-(t-1-s) w + k_s) v_s + exp(u + k_t) v_t) / (the same sums with v = 1)``,

    ``w = decay > 0`` (RWKV-4 stores ``time_decay`` and uses ``w = exp(time_decay)``), ``u = bonus``. Every
    form is exact for keys of any size: the parallel form is chapter 5's stable :func:`aft.aft_full`
    with :func:`rwkv_bias`; the recurrent one is RWKV's own, with a running maximum; the chunked one rescales
    each block by its rows' largest exponents. The RWKV layer multiplies the result by ``sigmoid(r)``, which
    makes it exactly AFT-full's output.
    """
    form, chunk = _chunk(form, chunk)
    k, v, decay, bonus = _same_dtype(k, v, decay, bonus)
    if k.shape[0] == 0:
        return jnp.zeros_like(v)
    bad = ~jnp.isfinite(k) | ~jnp.isfinite(v)  # channel by channel, as chapter 5's AFT
    poisoned = (jnp.cumsum(bad, axis=0, dtype=jnp.int32) > 0) | ~jnp.isfinite(decay) | ~jnp.isfinite(bonus)
    zero = jnp.zeros((), k.dtype)
    out = _rwkv(jnp.where(bad, zero, k), jnp.where(bad, zero, v), jnp.where(jnp.isfinite(decay), decay, zero),
                jnp.where(jnp.isfinite(bonus), bonus, zero), form, chunk)
    return jnp.where(poisoned, jnp.asarray(jnp.nan, out.dtype), out)


@_checks.shaped
def aft_as_retention(q: Float[Array, "T d"], k: Float[Array, "T d"], v: Float[Array, "T d"], gamma, *,
                     form: str = "chunked", chunk: int = 16) -> Float[Array, "T d"]:
    """Chapter 5's causal AFT-full with ``w[t, s] = (t - s) log gamma``, computed as two retentions per channel:

    ``sigmoid(Q) * retention(1, exp(K), V) / retention(1, exp(K), 1)``. ``gamma = 1`` is causal AFT-simple.
    Not stable for large keys (``exp(K)`` overflows where :func:`aft.aft_full` does not): it is the
    connection, not a way to compute AFT.
    """
    form, chunk = _chunk(form, chunk)
    gamma = _gamma(gamma)
    q, k, v = _same_dtype(q, k, v)
    g = jnp.full(q.shape[:1], jnp.log(jnp.asarray(gamma, q.dtype)), q.dtype)
    ones = jnp.ones(q.shape[:1] + (1,), q.dtype)

    def channel(k_c, v_c):
        both = _decayed(ones, jnp.exp(k_c)[:, None], jnp.stack([v_c, jnp.ones_like(v_c)], axis=1), g, None, form, chunk)
        return both[:, 0] / both[:, 1]

    return jax.nn.sigmoid(q) * jax.vmap(channel, in_axes=1, out_axes=1)(k, v)


# ---------------------------------------------------------------------------------------------
# The layer: one token mixer for every rule, with the book's init_cache/step decoding pair


RETNET_DECAYS = "1 - 2^(-5 - h)"


def retnet_gammas(heads: int) -> np.ndarray:
    """RetNet's fixed multi-scale decays ``gamma_h = 1 - 2^(-5 - h)``, ``h = 0 .. heads - 1`` (Sun et al. 2023)."""
    heads = _checks.positive_int("heads", heads)
    return 1.0 - 2.0 ** (-5.0 - np.arange(heads))


class LinearAttention(eqx.Module):
    """Multi-head causal linear attention with one of the chapter's state-update rules, ``(T, d_model) -> (T, d_out)``.

    ``q, k, v = x W_q, x W_k, x W_v`` (heads of ``key_dim`` and ``value_dim``, no biases), each head computed
    by the function of its ``rule``, then ``W_o``:

    - ``"linear"``: :func:`linear_attention`, ``elu + 1`` features, normalised (Katharopoulos et al. 2020);
    - ``"retention"``: :func:`retention` with RetNet's fixed ``gamma_h = 1 - 2^(-5 - h)``, ``q`` scaled by
      ``key_dim ** -0.5`` (without RetNet's rotation of ``q`` and ``k`` by position, its GroupNorm and its gate);
      ``"decay"``: the same with ``gamma_h = sigmoid(decay_logit_h)`` learned, starting from RetNet's values;
    - ``"delta"``: :func:`delta_rule`, keys and queries L2-normalised, ``beta_t = sigmoid(x W_beta)`` per head
      (DeltaNet, Yang et al. 2024, without its SiLU before the norm, its ``key_dim ** -0.5`` query scale and its
      output norm); ``"gated-delta"``: with the decay of ``"ssd"`` (Gated DeltaNet);
    - ``"ssd"``: :func:`ssd` with ``dt = softplus(x W_dt + dt_bias)``, ``a = -exp(a_log) dt`` per head,
      ``B = k``, ``C = q``, ``X = v dt`` (Mamba-2's SSD alone: no gate or skip ``D``).

    ``conv > 0`` adds the short causal depthwise convolution of size ``conv`` (Mamba-2 and DeltaNet use 4) over
    time on ``[q ; k ; v]`` right after the projections (no activation after it here, where Mamba-2 and DeltaNet
    apply a SiLU); it lets a token's key carry the token before it, the step associative recall needs.
    ``conv = 0``: none.

    The state of every head is ``key_dim x value_dim`` numbers (``value_dim + 1`` columns for ``"linear"``, whose
    last holds the normaliser; :meth:`init_cache`) whatever the length: :meth:`step` decodes one token in
    ``O(heads key_dim value_dim)``, against attention's cache of ``heads (key_dim + value_dim)`` numbers per token.
    """

    w_q: jax.Array
    w_k: jax.Array
    w_v: jax.Array
    w_o: jax.Array
    w_gate: jax.Array | None  # (d_model, heads, 2): beta and dt projections (delta, gated-delta, ssd; else None)
    gate_bias: jax.Array | None  # (heads, 2)
    decay_logit: jax.Array | None  # (heads,): gamma = sigmoid(decay_logit) (retention: fixed, decay: learned)
    a_log: jax.Array | None  # (heads,): A = -exp(a_log) (ssd, gated-delta)
    w_conv: jax.Array | None  # (conv, heads, 2 key_dim + value_dim): the short causal convolution, or None
    rule: str = eqx.field(static=True)
    form: str = eqx.field(static=True)
    chunk: int = eqx.field(static=True)

    def __init__(self, d_model: int, heads: int, key_dim: int, value_dim: int | None = None, *,
                 rule: str = "linear", d_out: int | None = None, conv: int = 0, form: str = "chunked",
                 chunk: int = 16, key: jax.Array):
        d_model = _checks.positive_int("d_model", d_model)
        heads = _checks.positive_int("heads", heads)
        key_dim = _checks.positive_int("key_dim", key_dim)
        value_dim = key_dim if value_dim is None else _checks.positive_int("value_dim", value_dim)
        d_out = d_model if d_out is None else _checks.positive_int("d_out", d_out)
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        self.rule, (self.form, self.chunk) = rule, _chunk(form, chunk)
        key = _checks.prng_key("key", key)
        self.w_q, self.w_k, self.w_v, self.w_o, self.w_gate = nn.init(
            key, ((d_model, heads, key_dim), (d_model, heads, key_dim), (d_model, heads, value_dim),
                  (heads, value_dim, d_out), (d_model, heads, 2)), "glorot",
            fan_in=(d_model, d_model, d_model, heads * value_dim, d_model),
            fan_out=(heads * key_dim, heads * key_dim, heads * value_dim, d_out, heads * 2))
        # one starting point: dt near 0.1 (softplus^-1(0.1) = -2.25), A = -1 for every head; Mamba-2 draws -A ~ U(1, 16),
        # flash-linear-attention's Gated DeltaNet -A ~ U(0, 16), both dt log-uniform in [0.001, 0.1], per head
        self.gate_bias = jnp.stack([jnp.zeros((heads,)), jnp.full((heads,), -2.25)], axis=1)
        gammas = retnet_gammas(heads)
        self.decay_logit = jnp.asarray(np.log(gammas / (1.0 - gammas)), jnp.float32)
        self.a_log = jnp.zeros((heads,))
        # only the parameters the rule reads, so that count_parameters counts what is trained
        if rule not in ("delta", "gated-delta", "ssd"):
            self.w_gate = self.gate_bias = None
        if rule not in ("retention", "decay"):
            self.decay_logit = None
        if rule not in ("gated-delta", "ssd"):
            self.a_log = None
        conv = _checks.nonnegative_int("conv", conv)
        width = 2 * key_dim + value_dim
        self.w_conv = (nn.init(jax.random.fold_in(key, 1), (conv, heads, width), "fan-in", fan_in=conv)
                       if conv else None)  # PyTorch's Conv1d default, as Mamba-2's and DeltaNet's layers

    @property
    def heads(self) -> int:
        return self.w_q.shape[1]

    @property
    def key_dim(self) -> int:
        return self.w_q.shape[2]

    @property
    def value_dim(self) -> int:
        return self.w_v.shape[2]

    @property
    def conv(self) -> int:
        return 0 if self.w_conv is None else self.w_conv.shape[0]

    def _projections(self, x):
        """``[q ; k ; v]`` before the convolution, ``(T, heads, 2 key_dim + value_dim)``."""
        return jnp.concatenate([jnp.einsum("td,dhk->thk", x, w) for w in (self.w_q, self.w_k, self.w_v)], axis=-1)

    def _convolved(self, raw, history):
        """The short causal depthwise convolution ``out[t] = sum_j w[j] raw[t - j]`` over ``history`` (the
        ``conv - 1`` rows before ``raw``) and ``raw``; returns the output rows and the new history."""
        if self.w_conv is None:
            return raw, history
        rows = jnp.concatenate([history, raw], axis=0)
        size, length = self.conv, raw.shape[0]
        out = sum(self.w_conv[j] * rows[size - 1 - j:size - 1 - j + length] for j in range(size))
        return out, rows[rows.shape[0] - (size - 1):]

    def _inputs(self, x, history=None):
        """Per head ``(heads, T, ...)``: queries, keys, values, log-decays ``g`` and rates ``beta``; and the
        convolution's new history."""
        raw = self._projections(x)
        if history is None:
            history = jnp.zeros((max(self.conv - 1, 0),) + raw.shape[1:], raw.dtype)
        qkv, history = self._convolved(raw, history)
        qkv = jnp.moveaxis(qkv, 0, 1)  # (heads, T, 2 key_dim + value_dim)
        dk = self.key_dim
        q, k, v = qkv[..., :dk], qkv[..., dk:2 * dk], qkv[..., 2 * dk:]
        if self.w_gate is not None:
            gates = jnp.einsum("td,dhc->htc", x, self.w_gate) + self.gate_bias[:, None]
            beta, dt = jax.nn.sigmoid(gates[..., 0]), jax.nn.softplus(gates[..., 1])
        zeros = jnp.zeros(q.shape[:2], q.dtype)
        g, b = zeros, None
        if self.rule == "linear":
            q, k = elu_plus_one(q), elu_plus_one(k)
        elif self.rule in ("retention", "decay"):
            logit = self.decay_logit if self.rule == "decay" else jax.lax.stop_gradient(self.decay_logit)
            g = zeros + jax.nn.log_sigmoid(logit)[:, None]
            q = q * self.key_dim ** -0.5
        elif self.rule in ("delta", "gated-delta"):
            unit = lambda a: a / jnp.sqrt(jnp.sum(a * a, axis=-1, keepdims=True) + 1e-6)
            q, k, b = unit(q), unit(k), beta
            if self.rule == "gated-delta":
                g = -jnp.exp(self.a_log)[:, None] * dt
        else:  # ssd
            g = -jnp.exp(self.a_log)[:, None] * dt
            v = v * dt[..., None]
        if self.rule == "linear":  # the normaliser is one more value column of ones
            v = jnp.concatenate([v, jnp.ones_like(v[..., :1])], axis=-1)
        return (q, k, v, g, b), history

    def _output(self, heads_out):
        if self.rule == "linear":
            heads_out = heads_out[..., :-1] / heads_out[..., -1:]
        return jnp.einsum("htv,hvo->to", heads_out, self.w_o)

    @_checks.shaped
    def __call__(self, x: Float[Array, "T d_model"], bias=None, *, process_heads=None,
                 form: str | None = None) -> Float[Array, "T d_out"]:
        """``x (T, d_model) -> (T, d_out)``, causal; ``form`` overrides the layer's (the three give the same).

        ``bias`` and ``process_heads`` are accepted for the mixer interface of :class:`attnbook.nn.Block` (which
        chapter 8's models call with them) and must be ``None``: there are no scores to add a bias to, and no
        positions to rotate (the decay is the only sense of order).
        """
        if bias is not None or process_heads is not None:
            raise ValueError("bias and process_heads must be None: linear attention has no softmax scores to bias "
                             "and no positions to rotate")
        nn.features("x", x, self.w_q.shape[0], "d_model")
        form = self.form if form is None else _form(form)
        (q, k, v, g, b), _ = self._inputs(x)
        per_head = lambda *a: _masked_linear(*a, form, self.chunk)
        heads_out = jax.vmap(per_head, in_axes=(0, 0, 0, 0, None if b is None else 0))(q, k, v, g, b)
        return self._output(heads_out)

    def init_cache(self, length: int
                   ) -> tuple[Float[Array, "heads key_dim state_dim"], Float[Array, "window heads width"]]:
        """The decoding state: every head's ``(key_dim, value_dim)`` matrix ``S`` (``value_dim + 1`` columns for
        ``"linear"``, whose last is the normaliser ``sum phi(k)``), zeros, and the convolution's last ``conv - 1``
        input rows ``(conv - 1, heads, 2 key_dim + value_dim)`` (no rows without a convolution). ``length`` is
        checked and otherwise unused: the state does not grow with the sequence."""
        _checks.positive_int("length", length)
        state = jnp.zeros((self.heads, self.key_dim, self.value_dim + (self.rule == "linear")))
        return state, jnp.zeros((max(self.conv - 1, 0), self.heads, 2 * self.key_dim + self.value_dim))

    def step(self, x: Float[Array, "1 d_model"], cache: tuple, t) -> tuple[Float[Array, "1 d_out"], tuple]:
        """One decoding step: the output for the new row ``x (1, d_model)`` and the updated cache (the recurrent
        form's one state update per head). ``t`` (the position) is accepted for the book's decoding interface;
        no rule here reads it."""
        _checks.ndim("x", x, 2, "(1, d_model)")
        if x.shape[0] != 1:
            raise ValueError(f"x must have shape (1, d_model), got {tuple(x.shape)}")
        nn.features("x", x, self.w_q.shape[0], "d_model")
        state, history = cache
        (q, k, v, g, b), history = self._inputs(x, history)
        run = lambda q_h, k_h, v_h, g_h, b_h, s_h: _recurrent(q_h, k_h, v_h, g_h, b_h, s_h)
        out, state = jax.vmap(run, in_axes=(0, 0, 0, 0, None if b is None else 0, 0))(q, k, v, g, b, state)
        return self._output(out), (state, history)

    def state_bytes(self, itemsize: int = 4) -> int:
        """Bytes of the decoding state (:meth:`init_cache`, ``itemsize`` bytes a number), the same for every
        length: chapter 12's against the KV cache's ``heads (key_dim + value_dim)`` numbers per token."""
        itemsize = _checks.positive_int("itemsize", itemsize)
        return itemsize * sum(int(np.prod(a.shape)) for a in jax.eval_shape(lambda: self.init_cache(1)))


__all__ = [
    "FORMS", "RULES", "segsum", "decay_mask", "decayed_linear_attention", "elu_plus_one", "linear_attention",
    "retention", "ssd", "delta_rule", "gated_delta_rule", "rwkv_bias", "rwkv", "aft_as_retention",
    "retnet_gammas", "LinearAttention",
]
