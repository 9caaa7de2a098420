"""Chapter 11's real text: a fixed subset of Python's own standard-library source, as characters.

The corpus ships with the library (``attnbook/stdlib_corpus/``, built by ``tools/make_stdlib_corpus.py``, whose
docstring gives the rule): the 151 top-level module files of CPython 3.11.7's standard library, 4,198,016 bytes,
with the Python Software Foundation licence beside them. :func:`load` decompresses it and checks the SHA-256 of
the bytes against :data:`SHA256`, so every reader trains on the same text.

**Split by file.** 15 files (364,234 bytes) are held out, chosen by a hash of their names (the first byte of
``SHA-256(name)`` below 26); the others are the training files. A window never crosses a file boundary, so no
held-out character is ever seen in training, and no window mixes two files.

**Vocabulary** (:data:`VOCAB_SIZE` = 98 characters): id 0 stands for any byte outside the printable ASCII set
(198 bytes of the corpus, in a few docstrings), id 1 is the tab, id 2 the newline, and ids 3-97 are the printable
characters ``' '`` to ``'~'`` (bytes 32-126) in order. Python source is almost all ASCII, so the model's
vocabulary is the characters a programmer types: smaller than 256 bytes. (The standard library indents with
spaces: the tab, id 1, never occurs in this corpus; it is kept so that any Python file can be encoded.)
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import lzma
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int

from . import _checks

FOLDER = pathlib.Path(__file__).parent / "stdlib_corpus"
SHA256 = "5059cf7bd58cd86793fbe499685a85206cdcf21e0c529129f0409134fbee9281"
"""SHA-256 of the uncompressed corpus (the concatenated files of CPython 3.11.7, see ``tools/make_stdlib_corpus``)."""
SPLITS = ("train", "held_out")
HELD_OUT_BELOW = 26
"""A file is held out when the first byte of SHA-256(its name) is below this (the rule of the build tool)."""

OTHER = 0
"""The id of every byte outside tab, newline and printable ASCII."""
CHARACTERS = "\t\n" + "".join(chr(b) for b in range(32, 127))
VOCAB_SIZE = 1 + len(CHARACTERS)
"""98: one id for every other byte, then tab, newline and the 95 printable ASCII characters."""

_TABLE = np.full(256, OTHER, dtype=np.uint8)
for _i, _c in enumerate(CHARACTERS):
    _TABLE[ord(_c)] = _i + 1


def encode(data: bytes | str) -> np.ndarray:
    """Bytes (or a string, UTF-8 encoded) to character ids ``(n,)`` uint8 in ``[0, VOCAB_SIZE)``."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"data must be bytes or a string, got {_checks.describe(data)}")
    return _TABLE[np.frombuffer(bytes(data), dtype=np.uint8)]


def decode(ids) -> str:
    """Character ids back to text; an id of :data:`OTHER` becomes ``'?'`` (the byte it stood for is gone)."""
    ids = np.asarray(ids)
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"ids must be integer character ids, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= VOCAB_SIZE):
        raise ValueError(f"ids must be integers in [0, {VOCAB_SIZE}), got values from {ids.min()} to {ids.max()}")
    return "".join("?" if i == OTHER else CHARACTERS[i - 1] for i in ids.reshape(-1).tolist())


def held_out(name: str) -> bool:
    """The split rule: True when the file ``name`` is held out."""
    return hashlib.sha256(name.encode("utf-8")).digest()[0] < HELD_OUT_BELOW


@dataclasses.dataclass(frozen=True)
class Split:
    """The files of one split as character ids: ``ids (n,)`` uint8, the files concatenated, and their names and
    boundaries (``starts[i]`` to ``starts[i + 1]`` is file ``names[i]``)."""

    name: str
    ids: np.ndarray
    names: tuple[str, ...]
    starts: np.ndarray
    _device: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)  # arrays on the device, cached

    def file(self, name: str) -> np.ndarray:
        """The ids of one file of this split."""
        if name not in self.names:
            raise ValueError(f"{name!r} is not a file of the {self.name!r} split")
        i = self.names.index(name)
        return self.ids[self.starts[i]:self.starts[i + 1]]

    def window_starts(self, length: int) -> np.ndarray:
        """Every position where a window of ``length`` ids lies inside one file (int32, increasing)."""
        length = _checks.positive_int("length", length)
        ranges = [np.arange(a, b - length + 1) for a, b in zip(self.starts[:-1], self.starts[1:]) if b - a >= length]
        if not ranges:
            raise ValueError(f"no file of the {self.name!r} split holds {length} characters")
        return np.concatenate(ranges).astype(np.int32)


def _read(folder: pathlib.Path, expected: str | None) -> tuple[bytes, dict]:
    folder = pathlib.Path(folder)
    paths = [folder / "stdlib.txt.xz", folder / "manifest.json"]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"corpus file {path} is missing (build it with `python -m tools.make_stdlib_corpus`)")
    try:
        data = lzma.decompress(paths[0].read_bytes())
    except lzma.LZMAError as error:
        raise ValueError(f"{paths[0]} is not a valid xz file: {error}") from None
    digest = hashlib.sha256(data).hexdigest()
    if expected is not None and digest != expected:
        raise ValueError(f"corpus {paths[0]} has SHA-256 {digest}, expected {expected}: not the book's corpus "
                         "(another Python version, or a damaged file)")
    manifest = json.loads(paths[1].read_text(encoding="utf-8"))
    sizes = [f["bytes"] for f in manifest["files"]]
    if sum(sizes) != len(data):
        raise ValueError(f"manifest {paths[1]} lists {sum(sizes)} bytes, the corpus holds {len(data)}")
    for f in manifest["files"]:
        if f["split"] != ("held_out" if held_out(f["name"]) else "train"):
            raise ValueError(f"manifest {paths[1]}: file {f['name']!r} is in split {f['split']!r}, against the rule")
    return data, manifest


@functools.lru_cache(maxsize=4)
def _load(folder: str, expected: str | None) -> dict:
    data, manifest = _read(pathlib.Path(folder), expected)
    ids = encode(data)
    offsets = np.concatenate([[0], np.cumsum([f["bytes"] for f in manifest["files"]])])
    splits = {}
    for split in SPLITS:
        chosen = [i for i, f in enumerate(manifest["files"]) if f["split"] == split]
        pieces = [ids[offsets[i]:offsets[i + 1]] for i in chosen]
        sizes = [len(p) for p in pieces]
        splits[split] = Split(split, np.concatenate(pieces), tuple(manifest["files"][i]["name"] for i in chosen),
                              np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))
    return splits


def load(split: str = "train", *, folder: str | pathlib.Path = FOLDER, sha256: str | None = SHA256) -> Split:
    """One split of the corpus (``"train"`` or ``"held_out"``) as a :class:`Split`, its SHA-256 checked.

    ``folder`` and ``sha256`` are for tests and for a corpus rebuilt from another CPython (``sha256=None`` skips the
    check). Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for bytes whose hash differs, a
    manifest that disagrees with them, or an unknown split. Loaded once per process (cached).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return _load(str(folder), sha256)[split]


def sample_windows(split: Split, key: jax.Array, batch: int, length: int) -> Int[Array, "batch length"]:
    """``batch`` random windows of ``length`` consecutive character ids from one split, int32 ``(batch, length)``.

    Each window lies inside one file of the split; every such window is equally likely (so a file is chosen in
    proportion to its length). ``key`` is a JAX PRNG key: the same key gives the same windows. For next-character
    training take ``length = T + 1`` and use ``windows[:, :-1]`` as inputs and ``windows[:, 1:]`` as targets.
    """
    if not isinstance(split, Split):
        raise TypeError(f"split must be a corpus Split (attnbook.corpus.load), got {_checks.describe(split)}")
    key = _checks.prng_key("key", key)
    batch = _checks.positive_int("batch", batch)
    length = _checks.positive_int("length", length)
    if "ids" not in split._device:
        split._device["ids"] = jnp.asarray(split.ids)
    if length not in split._device:
        split._device[length] = jnp.asarray(split.window_starts(length))
    return _gather(split._device["ids"], split._device[length], key, batch, length)


@eqx.filter_jit
def _gather(ids, starts, key, batch, length):
    chosen = starts[jax.random.randint(key, (batch,), 0, starts.shape[0])]
    return ids[chosen[:, None] + jnp.arange(length)].astype(jnp.int32)


__all__ = ["FOLDER", "SHA256", "SPLITS", "OTHER", "CHARACTERS", "VOCAB_SIZE", "encode", "decode", "held_out",
           "Split", "load", "sample_windows"]
