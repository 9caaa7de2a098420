"""Chapter 12: attnbook.linear_attention, each model in three forms and against its authors' reference code.

The references are transcribed into NumPy below, each with the repository, path and commit it was read from:

- Mamba-2's ``ssd_minimal_discrete`` and ``segsum`` (state-spaces/mamba, ``mamba_ssm/modules/ssd_minimal.py``,
  commit e9594ce1c732d97440f0332fdc43170a2294dbfa; Listing 1 of Dao & Gu 2024);
- RWKV-4's WKV recurrence from ``time_mixing`` (BlinkDL/ChatRWKV, ``RWKV_in_150_lines.py``,
  commit 965e40b85288a91c94c02bfa56adc3ce0fa20a82), with its ``time_decay = -exp(stored)`` convention;
- flash-linear-attention's naive implementations (fla-org/flash-linear-attention, commit
  bc3b101dcb713ddc5bd8924b66754eb68b5ccf89): ``fla/ops/linear_attn/naive.py`` (recurrent and chunk),
  ``fla/ops/retention/naive.py``, ``fla/ops/delta_rule/naive.py`` (recurrence and chunkwise),
  ``fla/ops/gated_delta_rule/naive.py`` (recurrent and chunk), ``fla/ops/simple_gla/naive.py`` (parallel).

PyTorch operations are written with their NumPy equivalents (``masked_fill`` -> ``np.where``, ``clone`` dropped
where NumPy evaluates the right-hand side first, ``rearrange`` -> ``reshape``/``transpose``), batch and head axes
kept as in the originals. Everything runs in float64, in which every pair agrees to 1e-10 or better.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import aft, nn
from attnbook import linear_attention as la

jax.config.update("jax_enable_x64", False)


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def normal(rng, *shape):
    return rng.normal(size=shape)


def unit_rows(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


# ---------------------------------------------------------------------------------------------
# Transcribed references (NumPy, float64)


def mamba_segsum(x):
    """state-spaces/mamba ``segsum`` (the stable one): repeat, mask below the diagonal, cumsum, mask above."""
    T = x.shape[-1]
    x = np.repeat(x[..., None], T, axis=-1)  # repeat(x, "... d -> ... d e", e=T)
    mask = np.tril(np.ones((T, T), dtype=bool), -1)
    x = np.where(mask, x, 0)
    x_segsum = np.cumsum(x, axis=-2)
    mask = np.tril(np.ones((T, T), dtype=bool), 0)
    return np.where(mask, x_segsum, -np.inf)


def mamba_segsum_unstable(x):
    T = x.shape[-1]
    x_cumsum = np.cumsum(x, axis=-1)
    x_segsum = x_cumsum[..., :, None] - x_cumsum[..., None, :]
    mask = np.tril(np.ones((T, T), dtype=bool), 0)
    return np.where(mask, x_segsum, -np.inf)


def mamba_ssd_minimal_discrete(X, A, B, C, block_len, initial_states=None):
    """state-spaces/mamba ``ssd_minimal_discrete``: X (b, l, h, p), A (b, l, h), B, C (b, l, h, n)."""
    assert X.shape[1] % block_len == 0
    b, l = X.shape[:2]
    X, A, B, C = [x.reshape((b, l // block_len, block_len) + x.shape[2:]) for x in (X, A, B, C)]
    A = A.transpose(0, 3, 1, 2)  # "b c l h -> b h c l"
    A_cumsum = np.cumsum(A, axis=-1)
    L = np.exp(mamba_segsum(A))
    Y_diag = np.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, L, X)
    decay_states = np.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
    states = np.einsum("bclhn,bhcl,bclhp->bchpn", B, decay_states, X)
    if initial_states is None:
        initial_states = np.zeros_like(states[:, :1])
    states = np.concatenate([initial_states, states], axis=1)
    decay_chunk = np.exp(mamba_segsum(np.pad(A_cumsum[:, :, :, -1], ((0, 0), (0, 0), (1, 0)))))
    new_states = np.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
    states, final_state = new_states[:, :-1], new_states[:, -1]
    state_decay_out = np.exp(A_cumsum)
    Y_off = np.einsum("bclhn,bchpn,bhcl->bclhp", C, states, state_decay_out)
    Y = (Y_diag + Y_off).reshape((b, l) + Y_diag.shape[3:])
    return Y, final_state


def rwkv4_wkv(k, v, time_first, time_decay):
    """BlinkDL/ChatRWKV ``RWKV_in_150_lines.py``, ``time_mixing``'s WKV part, one token after the other.

    ``time_decay`` is the loaded value, ``-exp(stored)``; the state starts at ``aa = bb = 0``, ``pp = -1e30``.
    """
    aa, bb, pp = np.zeros(k.shape[1]), np.zeros(k.shape[1]), np.full(k.shape[1], -1e30)
    out = []
    for t in range(k.shape[0]):
        ww = time_first + k[t]
        qq = np.maximum(pp, ww)
        e1 = np.exp(pp - qq)
        e2 = np.exp(ww - qq)
        a = e1 * aa + e2 * v[t]
        b = e1 * bb + e2
        out.append(a / b)
        ww = pp + time_decay
        qq = np.maximum(ww, k[t])
        e1 = np.exp(ww - qq)
        e2 = np.exp(k[t] - qq)
        aa = e1 * aa + e2 * v[t]
        bb = e1 * bb + e2
        pp = qq
    return np.stack(out)


def fla_naive_recurrent_linear_attn(q, k, v, scale=None, normalize=False):
    """fla ``linear_attn/naive.py::naive_recurrent_linear_attn``: q, k (B, T, H, K), v (B, T, H, V)."""
    if scale is None:
        scale = q.shape[-1] ** -0.5
    B, T, H, K, V = *q.shape, v.shape[-1]
    o = np.empty_like(v)
    S = np.zeros((B, H, K, V))
    for t in range(T):
        S = S + np.einsum("bhk,bhv->bhkv", k[:, t], v[:, t])
        o[:, t] = np.einsum("bhkv,bhk->bhv", S, q[:, t] * scale)
    if normalize:
        k_cum = np.cumsum(k, axis=1)
        o = o / ((q * scale * k_cum).sum(-1, keepdims=True) + 1e-10)
    return o


def fla_naive_chunk_linear_attn(q, k, v, scale=None, chunk_size=64):
    """fla ``naive_chunk_linear_attn`` (normalize=False), with its chunk size as an argument (64 in fla)."""
    if scale is None:
        scale = q.shape[-1] ** -0.5
    blocks = lambda x: x.reshape(x.shape[0], -1, chunk_size, *x.shape[2:]).transpose(0, 3, 1, 2, 4)  # b h n c d
    q, k, v = blocks(q) * scale, blocks(k), blocks(v)
    kv = k.swapaxes(-1, -2) @ v
    kv = np.cumsum(kv, axis=2)
    kv = np.concatenate([np.zeros_like(kv[:, :, :1]), kv[:, :, :-1]], axis=2)
    inter = q @ kv
    intra = np.where(np.triu(np.ones((chunk_size, chunk_size), dtype=bool), 1), 0, q @ k.swapaxes(-1, -2)) @ v
    o = inter + intra
    return o.transpose(0, 2, 3, 1, 4).reshape(o.shape[0], -1, o.shape[1], o.shape[-1])  # b (n c) h d


def fla_naive_retention(q, k, v):
    """fla ``retention/naive.py::naive_retention``: q, k, v (B, H, T, D); head h decays by 1 - 2^(-5 - h)."""
    _, n_heads, seq_len, d_head = q.shape
    s = np.log2(1 - 2.0 ** (-5.0 - np.arange(n_heads)))
    n = np.arange(seq_len, dtype=float)
    n = np.exp2((n[:, None] - n) * s.reshape(-1, 1, 1)) * (n[:, None] >= n)
    s = np.einsum("bhqd,bhkd,hqk->bhqk", q * d_head ** -0.5, k, n)
    return np.einsum("bhqk,bhkd->bhqd", s, v)


def fla_delta_rule_recurrence(q, k, v, beta):
    """fla ``delta_rule/naive.py::delta_rule_recurrence``: q, k, v (b, h, l, d), beta (b, h, l)."""
    b, h, l, d_k = q.shape
    o = np.zeros_like(v)
    S = np.zeros((b, h, d_k, v.shape[-1]))
    q = q * d_k ** -0.5
    beta = beta[..., None]
    for i in range(l):
        _k, _q, _v = k[:, :, i], q[:, :, i], v[:, :, i].copy()
        _v = _v - (S * _k[..., None]).sum(-2)
        _v = _v * beta[:, :, i]
        S = S + _k[..., None] * _v[..., None, :]
        o[:, :, i] = np.einsum("bhd,bhdm->bhm", _q, S)
    return o, S


def fla_delta_rule_chunkwise(q, k, v, beta, chunk_size=32):
    """fla ``delta_rule/naive.py::delta_rule_chunkwise``: the WY representation, one triangular inverse per chunk."""
    b, h, l, d_k = q.shape
    d_v = v.shape[-1]
    q = q * d_k ** -0.5
    v = v * beta[..., None]
    k_beta = k * beta[..., None]
    assert l % chunk_size == 0
    mask = np.triu(np.ones((chunk_size, chunk_size), dtype=bool), 0)
    blocks = lambda x: x.reshape(b, h, l // chunk_size, chunk_size, x.shape[-1])
    q, k, v, k_beta = map(blocks, [q, k, v, k_beta])
    attn = -np.where(mask, 0, k_beta @ k.swapaxes(-1, -2))
    for i in range(1, chunk_size):
        attn[..., i, :i] = attn[..., i, :i] + (attn[..., i, :, None] * attn[..., :, :i]).sum(-2)
    attn = attn + np.eye(chunk_size)
    u = attn @ v
    w = attn @ k_beta
    S = np.zeros((b, h, d_k, d_v))
    o = np.zeros_like(v)
    mask = np.triu(np.ones((chunk_size, chunk_size), dtype=bool), 1)
    for i in range(l // chunk_size):
        q_i, k_i = q[:, :, i], k[:, :, i]
        attn = np.where(mask, 0, q_i @ k_i.swapaxes(-1, -2))
        u_i = u[:, :, i] - w[:, :, i] @ S
        o_inter = q_i @ S
        o[:, :, i] = o_inter + attn @ u_i
        S = S + k_i.swapaxes(-1, -2) @ u_i
    return o.reshape(b, h, l, d_v), S


def fla_naive_recurrent_gated_delta_rule(q, k, v, beta, g, scale=None):
    """fla ``gated_delta_rule/naive.py::naive_recurrent_gated_delta_rule``: q, k, v (B, T, H, .), beta, g (B, T, H)."""
    q, k, v, beta, g = (x.swapaxes(1, 2) for x in (q, k, v, beta, g))
    B, H, T, K, V = *k.shape, v.shape[-1]
    o = np.zeros((B, H, T, V))
    h = np.zeros((B, H, K, V))
    if scale is None:
        scale = 1 / q.shape[-1] ** 0.5
    q = q * scale
    for i in range(T):
        b_q, b_k, b_v = q[:, :, i], k[:, :, i], v[:, :, i].copy()
        h = h * np.exp(g[:, :, i])[..., None, None]
        b_beta = beta[:, :, i]
        b_v = b_v - (h * b_k[..., None]).sum(-2)
        b_v = b_v * b_beta[..., None]
        h = h + b_k[..., None] * b_v[..., None, :]
        o[:, :, i] = np.einsum("bhd,bhdm->bhm", b_q, h)
    return o.swapaxes(1, 2), h


def fla_naive_chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=64, scale=None):
    """fla ``naive_chunk_gated_delta_rule``: pads T to a multiple of the chunk, unpads the output."""
    BT = chunk_size
    if scale is None:
        scale = 1 / q.shape[-1] ** 0.5
    q, k, v, beta, g = (x.swapaxes(1, 2) for x in (q, k, v, beta, g))
    T = q.shape[-2]
    pad_len = (BT - (T % BT)) % BT
    pad4 = ((0, 0), (0, 0), (0, pad_len), (0, 0))
    q, k, v = (np.pad(x, pad4) for x in (q, k, v))
    beta, g = (np.pad(x, pad4[:3]) for x in (beta, g))
    decay = g
    b, h, l, d_k = q.shape
    d_v = v.shape[-1]
    q = q * scale
    v = v * beta[..., None]
    k_beta = k * beta[..., None]
    mask = np.triu(np.ones((BT, BT), dtype=bool), 0)
    blocks = lambda x: x.reshape(b, h, l // BT, BT, x.shape[-1])
    q, k, v, k_beta, decay = map(blocks, [q, k, v, k_beta, decay[..., None]])
    decay = np.cumsum(decay[..., 0], axis=-1)
    decay_exp = np.exp(decay)[..., None]
    L_mask = np.tril(np.exp(np.tril(decay[..., :, None] - decay[..., None, :])))
    attn = -np.where(mask, 0, (k_beta @ k.swapaxes(-1, -2)) * L_mask)
    for i in range(1, BT):
        attn[..., i, :i] = attn[..., i, :i] + (attn[..., i, :i, None] * attn[..., :i, :i]).sum(-2)
    attn = attn + np.eye(BT)
    k_cumsum = attn @ v
    k_cumdecay = attn @ (k_beta * decay_exp)
    v = k_cumsum
    S = np.zeros((b, h, d_k, d_v))
    o = np.zeros_like(v)
    mask = np.triu(np.ones((BT, BT), dtype=bool), 1)
    for i in range(l // BT):
        q_i, k_i, v_i = q[:, :, i], k[:, :, i], v[:, :, i]
        attn = np.where(mask, 0, q_i @ k_i.swapaxes(-1, -2) * L_mask[:, :, i])
        v_prime = k_cumdecay[:, :, i] @ S
        v_new = v_i - v_prime
        o_inter = (q_i * np.exp(decay[:, :, i, :, None])) @ S
        o[:, :, i] = o_inter + attn @ v_new
        S = (S * np.exp(decay[:, :, i, -1, None, None])
             + (k_i * np.exp(decay[:, :, i, -1, None] - decay[:, :, i])[..., None]).swapaxes(-1, -2) @ v_new)
    o = o.reshape(b, h, l, d_v)[:, :, :T]
    return o.swapaxes(1, 2), S


def fla_naive_parallel_simple_gla(q, k, v, g, scale=None):
    """fla ``simple_gla/naive.py::naive_parallel_simple_gla``: q, k, v (B, T, H, .), g (B, T, H)."""
    q, k, v, g = (x.swapaxes(1, 2) for x in (q, k, v, g))
    if scale is None:
        scale = 1.0 / q.shape[-1] ** 0.5
    A = q @ k.swapaxes(-1, -2) * scale
    g = np.cumsum(g, axis=-1)
    D = np.tril(np.exp(np.tril(g[..., :, None] - g[..., None, :])))
    A = A * D
    return (A @ v).swapaxes(1, 2), A


# ---------------------------------------------------------------------------------------------
# Inputs, and each model as a function of them with the form as the last argument


def inputs(seed=0, T=23, dk=4, dv=3):
    rng = np.random.default_rng(seed)
    return dict(q=normal(rng, T, dk), k=normal(rng, T, dk), v=normal(rng, T, dv), g=-rng.uniform(0.0, 0.7, T),
                beta=rng.uniform(0.1, 1.0, T), decay=rng.uniform(0.1, 1.0, dv), bonus=normal(rng, dv))


MODELS = {
    "linear": lambda a, **f: la.linear_attention(a["q"], a["k"], a["v"], **f),
    "linear-unnormalised": lambda a, **f: la.linear_attention(a["q"], a["k"], a["v"], normalize=False, **f),
    "retention": lambda a, **f: la.retention(a["q"], a["k"], a["v"], 0.85, **f),
    "decayed": lambda a, **f: la.decayed_linear_attention(a["q"], a["k"], a["v"], a["g"], **f),
    "ssd": lambda a, **f: la.ssd(a["v"], a["g"], a["k"], a["q"], **f),
    "delta": lambda a, **f: la.delta_rule(a["q"], a["k"] / jnp.linalg.norm(a["k"], axis=1, keepdims=True), a["v"],
                                          a["beta"], **f),
    "gated-delta": lambda a, **f: la.gated_delta_rule(a["q"], a["k"] / jnp.linalg.norm(a["k"], axis=1, keepdims=True),
                                                      a["v"], a["beta"], a["g"], **f),
    "rwkv": lambda a, **f: la.rwkv(a["q"][:, :3], a["v"], a["decay"], a["bonus"], **f),
    "aft-as-retention": lambda a, **f: la.aft_as_retention(a["q"][:, :3], a["k"][:, :3], a["v"], 0.8, **f),
}


@pytest.mark.parametrize("model", MODELS)
def test_three_forms_agree_in_values_and_gradients(x64, model):
    """Parallel, chunked (T = 23 in chunks of 5: the last one padded) and recurrent, float64."""
    T, chunk = 23, 5
    a = {name: jnp.asarray(x) for name, x in inputs(1, T=T).items()}
    cotangent = jnp.asarray(np.random.default_rng(2).normal(size=(T, 3)))

    def loss(a, form):
        out = MODELS[model](a, form=form, chunk=chunk)
        return jnp.sum(out * cotangent), out

    results = {form: jax.jit(jax.grad(loss, has_aux=True), static_argnums=1)(a, form) for form in la.FORMS}
    outputs = {form: out for form, (_, out) in results.items()}
    grads = {form: grad for form, (grad, _) in results.items()}
    for form in ("chunked", "recurrent"):
        np.testing.assert_allclose(outputs[form], outputs["parallel"], rtol=1e-10, atol=1e-12, err_msg=form)
        for name in a:
            np.testing.assert_allclose(grads[form][name], grads["parallel"][name], rtol=1e-9, atol=1e-11,
                                       err_msg=f"{form}, d/d{name}")


@pytest.mark.parametrize("T, chunk", [(20, 5), (7, 16)])
def test_chunked_form_with_whole_and_oversized_chunks(x64, T, chunk):
    """T a multiple of the chunk, and T shorter than one chunk (one padded block), for the delta rule and SSD."""
    a = {name: jnp.asarray(x) for name, x in inputs(1, T=T).items()}
    for model in ("gated-delta", "ssd", "rwkv"):
        np.testing.assert_allclose(MODELS[model](a, form="chunked", chunk=chunk), MODELS[model](a, form="parallel"),
                                   rtol=1e-10, atol=1e-12, err_msg=model)


def test_forms_agree_in_float32_too():
    """The default precision: the three forms of the gated delta rule within float32's rounding."""
    a = {name: jnp.asarray(x, jnp.float32) for name, x in inputs(3, T=40).items()}
    outs = [MODELS["gated-delta"](a, form=form, chunk=8) for form in la.FORMS]
    assert all(o.dtype == jnp.float32 for o in outs)
    np.testing.assert_allclose(outs[1], outs[0], atol=1e-5)
    np.testing.assert_allclose(outs[2], outs[0], atol=1e-5)


def test_decay_mask_is_what_the_recurrence_does(x64):
    """L[t, s] equals the product a_{s+1} ... a_t multiplied out in a loop, and Mamba-2's two segsums agree."""
    g = -np.random.default_rng(0).uniform(0, 1, 9)
    a = np.exp(g)
    expected = np.zeros((9, 9))
    for s in range(9):
        factor = 1.0
        for t in range(s, 9):
            if t > s:
                factor *= a[t]
            expected[t, s] = factor
    np.testing.assert_allclose(la.decay_mask(jnp.asarray(g)), expected, rtol=1e-13)
    np.testing.assert_array_equal(la.segsum(jnp.asarray(g)), mamba_segsum(g))
    np.testing.assert_allclose(np.exp(mamba_segsum_unstable(g)), expected, rtol=1e-12)
    gamma = 0.9
    np.testing.assert_allclose(la.decay_mask(jnp.full(9, np.log(gamma))),
                               np.tril(gamma ** np.subtract.outer(np.arange(9), np.arange(9)).clip(0)), rtol=1e-13)


def test_segsum_is_stable_where_the_difference_of_cumsums_is_not():
    """float32, a large decay early and small ones later: the stable segsum keeps a_{s+1}..a_t exactly, the
    difference of prefix sums (segsum_unstable) loses them to the large prefix."""
    g = np.concatenate([np.full(4, -1e4), np.full(4, -1e-3)]).astype(np.float32)
    stable = np.asarray(la.segsum(jnp.asarray(g)))
    unstable = mamba_segsum_unstable(g.astype(np.float32))
    exact = -1e-3 * 3  # t = 7, s = 4: three steps of -1e-3
    assert abs(stable[7, 4] - exact) < 1e-8
    assert abs(unstable[7, 4] - exact) > 1e-4


def test_ssd_matches_mamba2_ssd_minimal(x64):
    """``ssd`` per head equals Listing 1 (``ssd_minimal_discrete``) with batch 2, 3 heads, blocks of 4."""
    rng = np.random.default_rng(4)
    b, l, h, p, n = 2, 12, 3, 5, 4
    dt = np.log1p(np.exp(normal(rng, b, l, h) - 1.0))  # softplus
    A = -np.exp(rng.uniform(size=h))
    X, B, C = normal(rng, b, l, h, p), normal(rng, b, l, h, n), normal(rng, b, l, h, n)
    expected, final = mamba_ssd_minimal_discrete(X * dt[..., None], A * dt, B, C, block_len=4)
    one = lambda x, a, bb, cc, form: la.ssd(x, a, bb, cc, form=form, chunk=4)
    for form in la.FORMS:
        got = jax.vmap(jax.vmap(lambda *z: one(*z, form), in_axes=(1, 1, 1, 1), out_axes=1))(
            X * dt[..., None], A * dt, B, C)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12, err_msg=form)
    # the final state (b, h, p, n) is the recurrent form's state transposed (ours is (n, p): keys by values)
    _, state = la._recurrent(jnp.asarray(C[0, :, 1]), jnp.asarray(B[0, :, 1]),
                             jnp.asarray((X * dt[..., None])[0, :, 1]),
                             jnp.asarray((A * dt)[0, :, 1]), None)
    np.testing.assert_allclose(state.T, final[0, 1], rtol=1e-10)


def test_rwkv_matches_the_150_line_reference(x64):
    """WKV of RWKV-4, every form, against ``RWKV_in_150_lines.py``'s recurrence, with keys up to 60 (whose
    exponentials would overflow float32 without the running maximum)."""
    rng = np.random.default_rng(5)
    T, d = 19, 6
    k, v = 20.0 * normal(rng, T, d), normal(rng, T, d)
    stored_decay, time_first = normal(rng, d), normal(rng, d)
    expected = rwkv4_wkv(k, v, time_first, -np.exp(stored_decay))
    for form in la.FORMS:
        got = la.rwkv(k, v, np.exp(stored_decay), time_first, form=form, chunk=4)
        np.testing.assert_allclose(got, expected, rtol=1e-10, err_msg=form)
    with jax.enable_x64(False):  # float32, keys of size 1000: still finite and equal to the float64 reference
        k32 = 1000.0 * np.sign(k)
        expected = rwkv4_wkv(k32, v, time_first, -np.exp(stored_decay))
        for form in la.FORMS:
            got = la.rwkv(k32.astype(np.float32), v.astype(np.float32), np.exp(stored_decay).astype(np.float32),
                          time_first.astype(np.float32), form=form, chunk=4)
            assert np.all(np.isfinite(got))
            # float32 rounds an exponent near 1000 to 6e-5, so weights carry that relative error
            np.testing.assert_allclose(got, expected, atol=5e-4, err_msg=form)


def test_linear_attention_matches_fla(x64):
    """fla's recurrent and chunk linear attention (scale 1/sqrt(K), no feature map), normalised and not."""
    rng = np.random.default_rng(6)
    B, T, H, K, V = 1, 16, 2, 4, 3
    q, k, v = np.abs(normal(rng, B, T, H, K)), np.abs(normal(rng, B, T, H, K)), normal(rng, B, T, H, V)
    scale = K ** -0.5
    per_head = lambda f: jax.vmap(f, in_axes=(1, 1, 1), out_axes=1)
    for normalize in (False, True):
        expected = fla_naive_recurrent_linear_attn(q, k, v, normalize=normalize)
        for form in la.FORMS:
            got = per_head(lambda a, b, c: la.linear_attention(a * scale, b, c, feature_map=None, normalize=normalize,
                                                               form=form, chunk=8))(q[0], k[0], v[0])
            np.testing.assert_allclose(got, expected[0], rtol=1e-8, err_msg=f"{form}, normalize={normalize}")
    np.testing.assert_allclose(fla_naive_chunk_linear_attn(q, k, v, chunk_size=8),
                               fla_naive_recurrent_linear_attn(q, k, v), rtol=1e-10)


def test_elu_feature_map_is_katharopoulos():
    x = jnp.asarray([-3.0, -0.5, 0.0, 2.0])
    np.testing.assert_allclose(la.elu_plus_one(x), np.where(x > 0, x + 1, np.exp(x)), rtol=1e-6)


def test_retention_matches_fla(x64):
    """fla's ``naive_retention``: head h with RetNet's gamma_h = 1 - 2^(-5 - h), queries scaled by d^-0.5."""
    rng = np.random.default_rng(7)
    b, h, T, d = 2, 3, 21, 4
    q, k, v = normal(rng, b, h, T, d), normal(rng, b, h, T, d), normal(rng, b, h, T, d)
    expected = fla_naive_retention(q, k, v)
    gammas = la.retnet_gammas(h)
    for form in la.FORMS:
        for head in range(h):
            got = jax.vmap(lambda a, c, e: la.retention(a * d ** -0.5, c, e, gammas[head], form=form, chunk=8))(
                q[:, head], k[:, head], v[:, head])
            np.testing.assert_allclose(got, expected[:, head], rtol=1e-10, err_msg=f"{form}, head {head}")


def test_delta_rule_matches_fla(x64):
    """fla's delta-rule recurrence and its chunkwise WY form, L2-normalised keys, 2 heads."""
    rng = np.random.default_rng(8)
    b, h, l, d = 1, 2, 16, 4
    q, k, v = normal(rng, b, h, l, d), unit_rows(normal(rng, b, h, l, d)), normal(rng, b, h, l, d)
    beta = rng.uniform(0.1, 1.0, (b, h, l))
    expected, state = fla_delta_rule_recurrence(q, k, v, beta)
    chunkwise, chunk_state = fla_delta_rule_chunkwise(q, k, v, beta, chunk_size=8)
    np.testing.assert_allclose(chunkwise, expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(chunk_state, state, rtol=1e-9, atol=1e-12)
    for form in la.FORMS:
        got = jax.vmap(lambda a, c, e, f: la.delta_rule(a * d ** -0.5, c, e, f, form=form, chunk=8))(
            q[0], k[0], v[0], beta[0])
        np.testing.assert_allclose(got, expected[0], rtol=1e-9, atol=1e-12, err_msg=form)
    _, ours = la._recurrent(jnp.asarray(q[0, 1]), jnp.asarray(k[0, 1]), jnp.asarray(v[0, 1]), jnp.zeros(l),
                            jnp.asarray(beta[0, 1]))
    np.testing.assert_allclose(ours, state[0, 1], rtol=1e-10)


def test_delta_rule_with_beta_one_overwrites_the_value_at_a_unit_key(x64):
    """The defining property: after writing v at unit key k with beta = 1, reading at k returns v exactly,
    whatever was stored there before (linear attention would return the sum of both)."""
    rng = np.random.default_rng(9)
    k = unit_rows(normal(rng, 1, 4))
    keys = np.concatenate([k, k])  # the same key twice
    values = normal(rng, 2, 3)
    out = la.delta_rule(keys, keys, values, np.ones(2), form="recurrent")
    np.testing.assert_allclose(out[1], values[1], rtol=1e-12)
    summed = la.linear_attention(keys, keys, values, feature_map=None, normalize=False, form="recurrent")
    np.testing.assert_allclose(summed[1], values[0] + values[1], rtol=1e-12)


def test_gated_delta_rule_matches_fla(x64):
    """fla's recurrent gated delta rule and its chunk form (T = 21, not a multiple of the chunk 8: padded)."""
    rng = np.random.default_rng(10)
    B, T, H, K, V = 1, 21, 2, 4, 3
    q, k, v = normal(rng, B, T, H, K), unit_rows(normal(rng, B, T, H, K)), normal(rng, B, T, H, V)
    beta, g = rng.uniform(0.1, 1.0, (B, T, H)), -rng.uniform(0.0, 0.5, (B, T, H))
    expected, state = fla_naive_recurrent_gated_delta_rule(q, k, v, beta, g)
    chunk, chunk_state = fla_naive_chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=8)
    np.testing.assert_allclose(chunk, expected, rtol=1e-9, atol=1e-12)
    per_head = lambda f: jax.vmap(f, in_axes=(1, 1, 1, 1, 1), out_axes=1)
    for form in la.FORMS:
        got = per_head(lambda a, c, e, f, gg: la.gated_delta_rule(a * K ** -0.5, c, e, f, gg, form=form, chunk=8))(
            q[0], k[0], v[0], beta[0], g[0])
        np.testing.assert_allclose(got, expected[0], rtol=1e-9, atol=1e-12, err_msg=form)


def test_decayed_linear_attention_matches_fla_simple_gla(x64):
    """Input-dependent scalar decay (SSD's mask, Gated Linear Attention's scalar form): fla's parallel simple GLA."""
    rng = np.random.default_rng(11)
    B, T, H, K, V = 1, 17, 2, 4, 3
    q, k, v = normal(rng, B, T, H, K), normal(rng, B, T, H, K), normal(rng, B, T, H, V)
    g = -rng.uniform(0.0, 0.5, (B, T, H))
    expected, weights = fla_naive_parallel_simple_gla(q, k, v, g)
    for form in la.FORMS:
        got = jax.vmap(lambda a, c, e, f: la.decayed_linear_attention(a * K ** -0.5, c, e, f, form=form, chunk=8),
                       in_axes=(1, 1, 1, 1), out_axes=1)(q[0], k[0], v[0], g[0])
        np.testing.assert_allclose(got, expected[0], rtol=1e-10, err_msg=form)
    # the T x T weights: our decay mask times the scaled scores
    mask = la.decay_mask(jnp.asarray(g[0, :, 0]))
    np.testing.assert_allclose((q[0, :, 0] * K ** -0.5) @ k[0, :, 0].T * mask, weights[0, 0], rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# The connection to chapter 5


def test_causal_aft_full_with_a_linear_decay_bias_is_two_retentions(x64):
    """AFT-full, causal, ``w[t, s] = (t - s) log gamma``, equals
    sigmoid(Q) * retention(1, e^K, V) / retention(1, e^K, 1), channel by channel."""
    rng = np.random.default_rng(12)
    T, d, gamma = 15, 5, 0.8
    q, k, v = normal(rng, T, d), normal(rng, T, d), normal(rng, T, d)
    w = np.subtract.outer(np.arange(T), np.arange(T)) * np.log(gamma)
    expected = aft.aft_full(q, k, v, w, causal=True)
    for form in la.FORMS:
        np.testing.assert_allclose(la.aft_as_retention(q, k, v, gamma, form=form, chunk=4), expected, rtol=1e-10)


def test_causal_aft_simple_is_undecayed_linear_attention_with_exponential_keys(x64):
    rng = np.random.default_rng(13)
    q, k, v = normal(rng, 12, 4), normal(rng, 12, 4), normal(rng, 12, 4)
    np.testing.assert_allclose(la.aft_as_retention(q, k, v, 1.0), aft.aft_simple(q, k, v, causal=True), rtol=1e-10)


def test_rwkv_time_mixing_is_aft_full_with_the_rwkv_bias(x64):
    """sigmoid(r) * WKV with one decay w and bonus u for every channel is chapter 5's AFT-full (causal) with
    ``w[t, s] = -(t - 1 - s) w`` below the diagonal and ``u`` on it; per-channel decays: one AFT per channel."""
    rng = np.random.default_rng(14)
    T, d = 13, 4
    r, k, v = normal(rng, T, d), 3.0 * normal(rng, T, d), normal(rng, T, d)
    w, u = 0.4, -0.7
    expected = aft.aft_full(r, k, v, la.rwkv_bias(w, u, T), causal=True)
    got = jax.nn.sigmoid(r) * la.rwkv(k, v, np.full(d, w), np.full(d, u), form="recurrent")
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    bias = np.asarray(la.rwkv_bias(w, u, 4))
    np.testing.assert_allclose(bias[3], [-2 * w, -w, 0.0, u])
    assert np.all(np.isneginf(bias[np.triu_indices(4, 1)]))


# ---------------------------------------------------------------------------------------------
# The layer


@pytest.mark.parametrize("rule, conv", [(rule, 3) for rule in la.RULES] + [("gated-delta", 0)])
def test_layer_forms_and_cached_decoding_agree(rule, conv):
    """Each rule's layer (with a short convolution of 3, and one without): its three forms, and decoding one token
    at a time with ``init_cache``/``step`` inside ``jax.lax.scan``, as chapter 7's cached decoder does."""
    T = 11
    layer = la.LinearAttention(8, 2, 4, 3, rule=rule, conv=conv, chunk=4, key=jax.random.key(0))
    x = jnp.asarray(np.random.default_rng(15).normal(size=(T, 8)), jnp.float32)
    full = {form: eqx.filter_jit(lambda layer, x, form=form: layer(x, form=form))(layer, x) for form in la.FORMS}
    assert full["parallel"].shape == (T, 8)
    for form in ("chunked", "recurrent"):
        np.testing.assert_allclose(full[form], full["parallel"], rtol=1e-4, atol=1e-5, err_msg=form)

    @jax.jit
    def decode(layer, x):
        def one(cache, inputs):
            x_t, t = inputs
            out, cache = layer.step(x_t[None], cache, t)
            return cache, out[0]
        return jax.lax.scan(one, layer.init_cache(T), (x, jnp.arange(T)))[1]

    np.testing.assert_allclose(decode(layer, x), full["parallel"], rtol=1e-4, atol=1e-5)
    state = 2 * 4 * (3 + (rule == "linear"))  # heads x key_dim x (value_dim, + 1 for the normaliser)
    window = max(conv - 1, 0) * 2 * (2 * 4 + 3)  # the convolution's last inputs
    assert layer.state_bytes() == 4 * (state + window)


@pytest.mark.parametrize("rule", la.RULES)
def test_layer_is_causal_and_trains(rule):
    """No output depends on a later token (gradient of output 5 w.r.t. tokens 6..), and every parameter the rule
    uses gets a finite gradient inside chapter 7's Block; retention's decays stay fixed, decay's do not."""
    layer = la.LinearAttention(8, 2, 4, rule=rule, conv=3, chunk=4, key=jax.random.key(1))
    x = jnp.asarray(np.random.default_rng(16).normal(size=(10, 8)), jnp.float32)
    jac = jax.jit(jax.jacobian(lambda x: layer(x)[5]))(x)  # (d_out, T, d_model)
    assert float(jnp.max(jnp.abs(jac[:, 6:]))) == 0.0
    assert float(jnp.max(jnp.abs(jac[:, :6]))) > 0.0
    block = nn.Block(layer, 8, key=jax.random.key(2))
    grads = eqx.filter_jit(eqx.filter_grad(lambda b: jnp.sum(b(x) ** 2)))(block)
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
    if rule in ("retention", "decay"):
        decay_grad = float(jnp.max(jnp.abs(grads.mixer.decay_logit)))
        assert (decay_grad > 0) == (rule == "decay")
    # every parameter the layer holds is read: each gets a gradient somewhere
    held = [g for g in jax.tree.leaves(grads.mixer) if rule != "retention" or g.ndim != 1]  # not retention's decays
    assert all(float(jnp.max(jnp.abs(g))) > 0 for g in held)


def test_forward_substitution_solves_the_unit_lower_system():
    """The delta rule's solve, against NumPy's dense solver, one system and a vmapped batch (the batch is what once
    deadlocked jax.scipy.linalg.solve_triangular's CPU kernel)."""
    rng = np.random.default_rng(0)
    lower = np.tril(rng.normal(size=(5, 7, 7)), -1).astype(np.float32) * 0.5
    rhs = rng.normal(size=(5, 7, 3)).astype(np.float32)
    expected = np.linalg.solve(np.eye(7) + lower.astype(np.float64), rhs.astype(np.float64))
    assert np.allclose(la._unit_lower_solve(jnp.asarray(lower[0]), jnp.asarray(rhs[0])), expected[0], atol=1e-5)
    assert np.allclose(jax.jit(jax.vmap(la._unit_lower_solve))(lower, rhs), expected, atol=1e-5)
