import sys, time
sys.path[:0]=['REPO/lib','REPO']
import jax, jax.numpy as jnp, equinox as eqx, optax, numpy as np
from attnbook import induction, train, corpus, positional, masking
POS = sys.argv[1]  # rope | sin
DATA = sys.argv[3] if len(sys.argv)>3 else 'corpus'
LR = float(sys.argv[4]) if len(sys.argv)>4 else 3e-3
SEED = int(sys.argv[5]) if len(sys.argv)>5 else 0
m = induction.AttentionOnlyLM(d_model=64, depth=2, heads=4, key=jax.random.key(SEED))
def fwd(model, tokens, weights=False):
    body = model.body
    x = body.embedding[tokens]
    if POS == 'sin': x = x + positional.sinusoidal_encoding(tokens.shape[0], x.shape[1])
    ws = []
    mask = masking.causal_mask(tokens.shape[0])
    for block in body.blocks:
        hook = positional.rope_heads if POS == 'rope' else None
        if weights:
            h = jax.vmap(block.norms[0])(x)
            ws.append(block.mixer.attention(h, h, h, mask, process_heads=hook)[1])
        x = block(x, process_heads=hook) if hook else block(x)
    x = jax.vmap(body.final_norm)(x)
    return (model.head(x), jnp.stack(ws)) if weights else model.head(x)
params, static = eqx.partition(m, eqx.is_inexact_array)
opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(optax.linear_schedule(0., LR, 100)))
state = opt.init(params)
@jax.jit
def step(p, s, w):
    def loss(p):
        model = eqx.combine(p, static)
        return train.cross_entropy(jax.vmap(lambda t: fwd(model, t))(w[:, :-1]), w[:, 1:]).mean()
    l, g = jax.value_and_grad(loss)(p); u, s = opt.update(g, s, p); return optax.apply_updates(p, u), s, l
@jax.jit
def evaluate(p, rep, held):
    model = eqx.combine(p, static)
    logits, ws = jax.vmap(lambda t: fwd(model, t, True))(rep[:, :-1])
    lp = train.cross_entropy(logits, rep[:, 1:])  # (N, T)
    hl = train.cross_entropy(jax.vmap(lambda t: fwd(model, t))(held[:, :-1]), held[:, 1:])
    return lp, ws, hl
rep = induction.repeated_random_tokens(jax.random.key(8), 32, 64, low=induction.PRINTABLE)
rep = jnp.concatenate([rep, rep[:, :1]], 1)
held = corpus.sample_windows(corpus.load("held_out"), jax.random.key(7), 128, 129)
codrep = jnp.concatenate([held[:32, :64], held[:32, :65]], 1)
train_data = corpus.load("train")
t = time.time()
for i in range(int(sys.argv[2]) + 1):
    kk = jax.random.fold_in(jax.random.key(1000 + SEED), i)
    if DATA == 'synthvar' or (DATA == 'curriculum' and i < 600):
        k1, k2 = jax.random.split(kk)
        first = jax.random.randint(k1, (32, 129), induction.PRINTABLE, 98)
        P = jax.random.randint(k2, (32, 1), 8, 61)
        idx = jnp.arange(129)[None, :] % P
        w = jnp.take_along_axis(first, idx, axis=1)
    elif DATA == 'synth':
        w = induction.repeated_random_tokens(kk, 32, 64, low=induction.PRINTABLE); w = jnp.concatenate([w, w[:, :1]], 1)
    else:
        w = corpus.sample_windows(train_data, kk, 32, 129)
        if DATA in ('mixsynth', 'repeat50'):  # (curriculum: plain code after step 600)
            k1, k2 = jax.random.split(jax.random.fold_in(kk, 1))
            P = jax.random.randint(k2, (32, 1), 8, 61)
            idx = jnp.arange(129)[None, :] % P
            if DATA == 'mixsynth':
                src = jax.random.randint(k1, (32, 129), induction.PRINTABLE, 98)
                rows = 8
            else:
                src = w
                rows = 16
            rep_w = jnp.take_along_axis(src, idx, axis=1)
            w = jnp.where(jnp.arange(32)[:, None] < rows, rep_w, w)
        if DATA == 'repeat':
            rep_w = jnp.concatenate([w[:, :64], w[:, :65]], axis=1)
            w = jnp.where(jnp.arange(32)[:, None] < 8, rep_w, w)
    params, state, l = step(params, state, w)
    if i % 100 == 0:
        lp, ws, hl = evaluate(params, rep, held)
        ws = np.asarray(ws)  # N depth heads T T
        ind = np.asarray(induction.induction_score(ws, 64)).mean(0).round(2).tolist()
        prev = np.asarray(induction.previous_token_score(ws)).mean(0).round(2).tolist()
        lp = np.asarray(lp); hl = np.asarray(hl)
        cl = np.asarray(evaluate(params, codrep, held[:2])[0])
        print(f"{i} train {float(l):.3f} held {hl.mean():.3f} held L[8:16] {hl[:, 8:16].mean():.3f} L[112:128] {hl[:, 112:128].mean():.3f}"
              f" rep1 {lp[:, :63].mean():.2f} rep2 {lp[:, 64:127].mean():.2f} code1 {cl[:, :63].mean():.2f} code2 {cl[:, 64:127].mean():.2f} ind {ind} prev {prev} {time.time()-t:.0f}s", flush=True)
