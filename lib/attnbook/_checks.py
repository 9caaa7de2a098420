"""Argument checks shared by the library: the one mechanism behind the contract in ``attnbook``'s docstring.

Three kinds of check, from cheapest to dearest:

- **Shapes and dtypes**, from the jaxtyping annotations of a function's signature
  (:func:`shaped`): ``q: Float[Array, "Tq d"]`` is both the documented and the checked shape. Shapes
  and dtypes are static under ``jax.jit``/``jax.vmap``, so the check runs once, at trace time, and costs
  nothing when the compiled program runs.
- **Python arguments** (sizes, rates, flags, random generators and keys): :func:`positive_int`,
  :func:`positive_float`, :func:`probability`, :func:`numpy_rng`, :func:`prng_key`.
- **Values of arrays** (token ids in range, lengths within a maximum): :func:`values`. On concrete
  arrays it raises a ``ValueError`` at once; on traced ones (inside ``jit``/``vmap``) the compiled program
  checks them at run time and stops with an ``EquinoxRuntimeError`` (under ``jax.jit``: a
  ``JaxRuntimeError`` carrying the same message). In the library's own compiled programs (:func:`jit`)
  the check's result is returned with the program's outputs (``jax.experimental.checkify``), so the
  program has no host callback and JAX's persistent compilation cache keeps it; elsewhere it is
  :func:`equinox.error_if`'s callback. The cost is one elementwise comparison and a reduction over the
  checked array, negligible next to any matrix product of the book.

Every message names the argument, says what was expected and shows what was received.
"""

from __future__ import annotations

import functools
import inspect
import logging
import numbers
import sys
import types
import typing

import equinox as eqx
import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
from jax._src import checkify as _checkify  # private: registering a rule (see _value_check_p)
from jax.experimental import checkify
from jax.interpreters import ad, batching, mlir

# ---------------------------------------------------------------------------------------------
# Python arguments


def positive_int(name: str, value) -> int:
    """Return ``value`` as an ``int`` if it is a positive integer, else raise ``ValueError``/``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive integer, got {_describe(value)}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def kv_heads(heads: int, kv_heads, heads_name: str) -> int:
    """``kv_heads`` checked (a positive divisor of ``heads``), ``heads`` for ``None`` (grouped-query attention)."""
    if kv_heads is None:
        return heads
    kv_heads = positive_int("kv_heads", kv_heads)
    if heads % kv_heads:
        raise ValueError(f"{heads_name} must be divisible by kv_heads (each key/value head serves a group of "
                         f"query heads), got {heads_name}={heads}, kv_heads={kv_heads}")
    return kv_heads


def nonnegative_int(name: str, value) -> int:
    """Return ``value`` as an ``int`` if it is an integer >= 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a non-negative integer, got {_describe(value)}")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def positive_float(name: str, value) -> float:
    """Return ``value`` as a ``float`` if it is a finite positive number, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a finite positive number, got {_describe(value)}")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return float(value)


def probability(name: str, value, *, high: float = 1.0) -> float:
    """Return ``value`` as a ``float`` if it lies in ``[0, high]``, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number in [0, {high}], got {_describe(value)}")
    if not (0.0 <= value <= high):  # also rejects NaN
        raise ValueError(f"{name} must be a number in [0, {high}], got {value!r}")
    return float(value)


def flag(name: str, value) -> bool:
    """``value`` as a ``bool`` if it is one (Python or NumPy); anything else is a ``TypeError``, not read as truthy."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {_describe(value)}")


def function(name: str, fn):
    """``fn`` if it is callable, else a ``TypeError``."""
    if not callable(fn):
        raise TypeError(f"{name} must be a function, got {_describe(fn)}")
    return fn


def numpy_rng(name: str, rng) -> np.random.Generator:
    """Return ``rng`` if it is a NumPy ``Generator``; an int seed gets a ``TypeError`` saying what to pass."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"{name} must be a NumPy random Generator such as np.random.default_rng(0), got {_describe(rng)}"
        )
    return rng


def prng_key(name: str, key) -> jax.Array:
    """Return ``key`` if it is a JAX PRNG key (``jax.random.key(0)`` or a legacy ``PRNGKey(0)``), else raise."""
    if isinstance(key, (jax.Array, np.ndarray)):
        dtype = key.dtype
        if jnp.issubdtype(dtype, jax.dtypes.prng_key) and key.shape == ():
            return key
        if dtype == jnp.uint32 and key.shape == (2,):  # legacy jax.random.PRNGKey
            return key
    raise TypeError(f"{name} must be a JAX random key such as jax.random.key(0), got {_describe(key)}")


def describe(value) -> str:
    """A short description of a received value for error messages: arrays by dtype and shape."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"an array of dtype {value.dtype} and shape {tuple(value.shape)}"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


_describe = describe  # the name used inside this module


# ---------------------------------------------------------------------------------------------
# Shapes and dtypes


def ndim(name: str, x, expected: int, meaning: str) -> None:
    """Raise unless ``x`` has ``expected`` dimensions; ``meaning`` spells the shape, e.g. ``"(T, d)"``."""
    shape_ = np.shape(x)
    if len(shape_) != expected:
        raise ValueError(f"{name} must have shape {meaning}, got an array of shape {shape_}")


_KINDS = (  # (is a jaxtyping dtype name of the family, how messages name it, test on a NumPy/JAX dtype)
    (lambda n: n in ("bool", "bool_"), "boolean", lambda dt: dt == np.bool_),
    (lambda n: n.startswith(("int", "uint")), "integer", lambda dt: jnp.issubdtype(dt, jnp.integer)),
    (lambda n: "float" in n, "floating-point", lambda dt: jnp.issubdtype(dt, jnp.floating)),
)


def _kind(annotation) -> tuple[str, typing.Callable] | None:
    """The dtype family a jaxtyping annotation asks for (``None``: any dtype, e.g. ``Shaped``)."""
    if isinstance(annotation.dtypes, str) or not hasattr(annotation.dtypes, "__iter__"):
        return None  # Shaped[...]: jaxtyping's "any dtype"
    allowed = set(annotation.dtypes)
    for family, label, test in _KINDS:
        if all(family(n) for n in allowed):
            return label, test
    return None


def _dims(annotation) -> list:
    """The dimensions of a jaxtyping annotation as ``("name", str) | ("fixed", int) | ("any",) | ("*name", str) | ("...",)``.

    Read from the annotation's shape string (``annotation.dim_str``, e.g. ``"*batch T d"``), the text the
    signature shows, so nothing depends on jaxtyping's internal classes.
    """
    out = []
    for token in annotation.dim_str.split():
        if token in ("...", "*_"):
            out.append(("...",))
        elif token == "_":
            out.append(("any",))
        elif token.isdigit():
            out.append(("fixed", int(token)))
        elif token.startswith("*") and token[1:].isidentifier():
            out.append(("*name", token[1:]))
        elif token.isidentifier():
            out.append(("name", token))
        else:
            raise NotImplementedError(f"shape annotation {annotation.dim_str!r}: dimension {token!r} is not supported")
    if sum(d[0] in ("*name", "...") for d in out) > 1:
        raise NotImplementedError(f"shape annotation {annotation.dim_str!r}: at most one variadic dimension")
    return out


def _spell(dims, bound) -> str:
    """``(Tq, d=8)``: the expected shape, with the sizes already fixed by earlier arguments."""
    parts = []
    for dim in dims:
        if dim[0] == "name":
            parts.append(f"{dim[1]}={bound[dim[1]]}" if dim[1] in bound else dim[1])
        elif dim[0] == "fixed":
            parts.append(str(dim[1]))
        elif dim[0] == "*name":
            parts.append(f"*{dim[1]}={bound[dim[1]]}" if dim[1] in bound else f"*{dim[1]}")
        else:
            parts.append("..." if dim[0] == "..." else "_")
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def check_array(name: str, x, annotation, bound: dict):
    """Check one argument against a jaxtyping ``annotation``; sizes of named axes go into ``bound``.

    Returns the argument as an array (a nested list or a number becomes a NumPy array, so the
    function receives what was checked). Raises ``TypeError`` for something that is not an array or
    has the wrong dtype family, ``ValueError`` for a wrong number of axes or a size that disagrees
    with ``bound``.
    """
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        if isinstance(x, (list, tuple, numbers.Number)) and not isinstance(x, bool):
            x = np.asarray(x)
        else:
            raise TypeError(f"{name} must be an array of shape {_spell(_dims(annotation), bound)}, got {_describe(x)}")
    kind = _kind(annotation)
    if kind is not None and not kind[1](x.dtype):
        article = "an" if kind[0][0] in "aeiou" else "a"
        raise TypeError(f"{name} must be {article} {kind[0]} array, got dtype {x.dtype}")
    dims, got = _dims(annotation), tuple(x.shape)
    expected = _spell(dims, bound)
    variadic = [i for i, d in enumerate(dims) if d[0] in ("*name", "...")]
    if (not variadic and len(got) != len(dims)) or (variadic and len(got) < len(dims) - 1):
        raise ValueError(f"{name} must have shape {expected}, got an array of shape {got}")
    if variadic:
        i = variadic[0]
        tail = len(dims) - i - 1
        pairs = list(zip(dims[:i], got[:i])) + [(dims[i], got[i:len(got) - tail])] + list(zip(dims[i + 1:], got[len(got) - tail:]))
    else:
        pairs = list(zip(dims, got))
    new = {}
    for dim, size in pairs:
        if dim[0] in ("name", "*name"):
            known = bound.get(dim[1], new.get(dim[1]))
            if known is None:
                new[dim[1]] = size
            elif known != size:
                # Name the argument the size came from: either of the two may be the wrong one.
                origin = bound.get(("from", dim[1]))
                source = f"; {origin[0]} has shape {origin[1]}, so {dim[1]}={known}" if origin else ""
                raise ValueError(f"{name} must have shape {expected}, got {got}{source}")
        elif dim[0] == "fixed" and size != dim[1]:
            raise ValueError(f"{name} must have shape {expected}, got {got}")
    bound.update(new)
    bound.update({("from", dim): (name, got) for dim in new})
    return x


def _array_annotation(hint):
    """``(annotation, optional)`` for a jaxtyping hint, possibly ``X | None``; ``None`` for other hints."""
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        if len(args) != 1:
            return None
        hint = args[0]
    if isinstance(hint, type) and hasattr(hint, "dim_str") and hasattr(hint, "dtypes"):
        return hint, optional
    return None


def shaped(fn):
    """Check every jaxtyping-annotated argument of ``fn`` against its annotation, on each call.

    Named axes bind across arguments in signature order: with ``q: Float[Array, "Tq d"]`` and
    ``k: Float[Array, "Tk d"]``, a ``k`` whose last axis differs from ``q``'s is rejected, and the
    message says ``k must have shape (Tk, d=8), got (5, 7)``. An argument annotated ``X | None`` may be
    ``None``. A nested list is converted to a NumPy array, checked, and passed on as that array.
    Works on functions and on methods (``self`` is not annotated); under ``jit``/``vmap`` the check
    runs at trace time on the static shapes.
    """
    signature = inspect.signature(fn)
    hints = typing.get_type_hints(fn, include_extras=True)
    specs = {name: spec for name in signature.parameters if name in hints
             for spec in [_array_annotation(hints[name])] if spec is not None}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        call = signature.bind(*args, **kwargs)
        bound: dict = {}
        for name, (annotation, optional) in specs.items():
            if name not in call.arguments:  # a default (None, for an optional array)
                continue
            value = call.arguments[name]
            if value is None and optional:
                continue
            call.arguments[name] = check_array(name, value, annotation, bound)
        return fn(*call.args, **call.kwargs)

    return wrapper


# ---------------------------------------------------------------------------------------------
# Values


def is_concrete(x) -> bool:
    """True when ``x`` holds values (not a tracer inside ``jit``/``vmap``), so values can be checked."""
    return not isinstance(x, jax.core.Tracer)


def values(name: str, x, bad, expected: str):
    """Reject ``x`` where the boolean array ``bad`` (same shape, computed from ``x``) is True.

    Returns ``x``; **use the returned array** downstream: under ``jit`` the check is attached to it
    (``_value_check_p``, below), and an unused result would let JAX drop the check. Concrete input: a
    ``ValueError`` naming the argument, ``expected`` (e.g. ``"integers in [0, 3)"``) and the first
    offending value with its index. Traced input: the compiled program stops with that message.
    """
    if is_concrete(x) and is_concrete(bad):
        bad = np.asarray(bad)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            got = (np.asarray(x)[index] if np.ndim(x) else np.asarray(x)).item()
            where = f" at index {index if len(index) > 1 else index[0]}" if index else ""
            raise ValueError(f"{name} must be {expected}, got {got!r}{where}")
        return x
    return _value_check_p.bind(x, bad, message=f"{name} must be {expected}")


# A value check inside a compiled program is one primitive, ``attnbook_value_check(x, bad) -> x``, with two
# meanings chosen after tracing, so that the traced program is the same wherever it runs:
#
# - inside the library's compiled entry points (:func:`jit`: ``fit``, the evaluations, decoding), which
#   run under ``jax.experimental.checkify``, the rule below turns it into a returned error value: the
#   program has no host callback, so it enters JAX's persistent compilation cache, and :func:`jit` raises
#   the error after the program returns;
# - anywhere else (a reader's own ``jax.jit``, ``eqx.filter_jit``, ``jax.vmap``), it is lowered as
#   ``equinox.error_if``: a host callback that stops the program with the message (such a program is
#   compiled every time, since XLA bakes callbacks into it).
#
# Registering a checkify rule is not public JAX API (``jax._src.checkify``); requirements.lock pins JAX, and
# tests/lib/test_checks.py checks both meanings and that the entry points' programs are cached.

_value_check_p = jax.extend.core.Primitive("attnbook_value_check")


@_value_check_p.def_impl
def _value_check_impl(x, bad, *, message):  # concrete values under jax.vmap
    return eqx.error_if(x, jnp.any(bad), message)


_value_check_p.def_abstract_eval(lambda x, bad, *, message: x)
mlir.register_lowering(_value_check_p, mlir.lower_fun(_value_check_impl, multiple_results=False))


def _value_check_batch(args, dims, *, message):  # "any of bad": where its batch axis lies does not matter
    return _value_check_p.bind(*args, message=message), dims[0]


def _value_check_jvp(primals, tangents, *, message):  # the identity on x; bad has no tangent
    return _value_check_p.bind(*primals, message=message), tangents[0]


batching.primitive_batchers[_value_check_p] = _value_check_batch
ad.primitive_jvps[_value_check_p] = _value_check_jvp


def _value_check_checkify(error, enabled_errors, x, bad, *, message):
    if _checkify.FailedCheckError not in enabled_errors:  # someone's checkify without user checks: keep the callback
        return error, _value_check_p.bind(x, bad, message=message)
    failed = _checkify.FailedCheckError(_checkify.get_traceback(), message.replace("{", "{{").replace("}", "}}"))
    return _checkify.assert_func(error, jnp.any(bad), failed), x


_checkify.error_checks[_value_check_p] = _value_check_checkify


def jit(fn):
    """``equinox.filter_jit(fn)`` whose value checks (:func:`values`) come back as a value, not a host callback.

    The compiled program returns a ``checkify`` error next to ``fn``'s result; a failed check raises an
    ``EquinoxRuntimeError`` with its message after the program has run, as ``equinox.filter_jit`` raises it
    for ``equinox.error_if``. The program has no callback, so JAX's persistent compilation cache keeps it.
    Called inside someone else's trace (``jax.jit``, ``vmap``, ``grad``), ``fn`` runs as
    ``equinox.filter_jit(fn)`` and its checks stay in the enclosing program, as callbacks.
    """
    plain = eqx.filter_jit(fn)
    checked = eqx.filter_jit(functools.wraps(fn)(checkify.checkify(fn)))  # fn's name, in the cache's too

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((args, kwargs))):
            return plain(*args, **kwargs)
        error, out = checked(*args, **kwargs)
        failed = error.get_exception()
        if failed is not None:
            raise eqx.EquinoxRuntimeError(failed.fmt_string.format())
        return out

    return wrapper


def compiled_when_eager(fn):
    """``fn`` (a layer's ``__call__``) compiled as one program when it is called on concrete arrays, as a notebook
    calls a layer: one compilation per input shape instead of one per operation, which on a CPU costs 20-30 ms
    each. Called inside someone else's trace, or given a function (``process_heads``, which may close over that
    trace's values), ``fn`` runs as it is. The results are those of ``fn`` to float32 rounding (the compiler may
    fuse operations)."""
    compiled = eqx.filter_jit(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        leaves = jax.tree.leaves((args, kwargs))
        if any(isinstance(leaf, jax.core.Tracer) or callable(leaf) for leaf in leaves):
            return fn(*args, **kwargs)
        return compiled(*args, **kwargs)

    return wrapper


# Under plain ``jax.jit`` a failed value check reaches the reader as a ``JaxRuntimeError`` whose text
# starts with "INTERNAL: CpuCallback error calling callback: Traceback ..." and ends, a screen later, with
# the sentence that matters. (``equinox.filter_jit`` re-raises it cleanly; ``jax.jit`` cannot, since no
# code of ours runs at its boundary.) In a notebook, the handler below shows that sentence first.
_RUNTIME_MARK = "_EquinoxRuntimeError: "


def runtime_message(error: BaseException) -> str | None:
    """The message of a value check that stopped a compiled program, out of the error JAX raised; else ``None``."""
    text = str(error)
    if type(error).__name__ not in ("JaxRuntimeError", "XlaRuntimeError") or _RUNTIME_MARK not in text:
        return None
    return text.rsplit(_RUNTIME_MARK, 1)[1].split("\n", 1)[0].strip() or None


class _QuietValueChecks(logging.Filter):
    """Drops JAX's log record of a callback that failed because a value check (``equinox.error_if``) fired."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (error is not None and type(error).__name__ == "_EquinoxRuntimeError")


def show_runtime_errors_first() -> bool:
    """In IPython/Jupyter, print a failed value check's message above JAX's long error. Returns whether it could.

    Only errors that carry an attnbook (Equinox) value check are touched; their full traceback follows
    unchanged. Outside IPython this does nothing.
    """
    try:
        from IPython import get_ipython
        from jax.errors import JaxRuntimeError
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False

    # JAX also logs every failed callback, with its traceback, as the program stops: for a value check
    # that log repeats the error above the message. Only those records are dropped.
    callback_log = logging.getLogger("jax._src.callback")
    if not any(isinstance(f, _QuietValueChecks) for f in callback_log.filters):
        callback_log.addFilter(_QuietValueChecks())

    def handler(self, etype, value, tb, tb_offset=None):
        message = runtime_message(value)
        if message is not None:
            print(f"ValueError inside a compiled program: {message}", file=sys.stderr)
        self.showtraceback((etype, value, tb), tb_offset=tb_offset)

    shell.set_custom_exc((JaxRuntimeError,), handler)
    return True


def tokens(name: str, tokens, vocab_size: int):
    """Integer token ids ``(T,)`` in ``[0, vocab_size)``, checked (values also under ``jit``). Returns them (use it)."""
    ndim(name, tokens, 1, "(T,)")
    if not jnp.issubdtype(jnp.asarray(tokens).dtype, jnp.integer):
        raise TypeError(f"{name} must be integer token ids, got dtype {jnp.asarray(tokens).dtype}")
    return integers_in_range(name, tokens, 0, vocab_size)


def integers_in_range(name: str, x, low: int, high: int):
    """:func:`values` for integer ids: every entry of ``x`` in ``[low, high)``. Returns ``x`` (use it)."""
    return values(name, x, (x < low) | (x >= high), f"integers in [{low}, {high})")
