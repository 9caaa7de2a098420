"""attnbook.corpus: the shipped corpus matches its hash and licence, the split is by file, windows come from one split."""

import hashlib
import json
import lzma
import shutil

import jax
import numpy as np
import pytest

from attnbook import corpus


def test_shipped_corpus_matches_its_hash_and_manifest():
    data = lzma.decompress((corpus.FOLDER / "stdlib.txt.xz").read_bytes())
    assert hashlib.sha256(data).hexdigest() == corpus.SHA256
    manifest = json.loads((corpus.FOLDER / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["sha256"] == corpus.SHA256 and manifest["python"] == "3.11.7"
    assert sum(f["bytes"] for f in manifest["files"]) == len(data) == 4_198_016
    licence = (corpus.FOLDER / "LICENSE").read_text(encoding="utf-8")
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in licence
    assert (corpus.FOLDER / "stdlib.txt.xz").stat().st_size < 2_000_000


def test_split_is_by_file_and_disjoint():
    train, held = corpus.load("train"), corpus.load("held_out")
    assert set(train.names).isdisjoint(held.names)
    assert len(train.names) + len(held.names) == 151 and len(held.names) == 15
    assert all(corpus.held_out(n) for n in held.names) and not any(corpus.held_out(n) for n in train.names)
    assert len(train.ids) + len(held.ids) == 4_198_016
    # Each file's ids are its bytes, mapped to characters, at the offset the manifest gives.
    data = lzma.decompress((corpus.FOLDER / "stdlib.txt.xz").read_bytes())
    files = json.loads((corpus.FOLDER / "manifest.json").read_text(encoding="utf-8"))["files"]
    offsets = np.cumsum([0] + [f["bytes"] for f in files])
    for i, f in enumerate(files):
        if f["name"] in ("enum.py", "abc.py"):
            split = held if f["name"] in held.names else train
            assert np.array_equal(split.file(f["name"]), corpus.encode(data[offsets[i]:offsets[i + 1]]))
    assert np.array_equal(np.diff(held.starts), [held.file(n).size for n in held.names])


def test_vocabulary_round_trip():
    text = "def f(x):\n\treturn x + 1  # ~\n"
    ids = corpus.encode(text)
    assert ids.max() < corpus.VOCAB_SIZE == 98 and corpus.decode(ids) == text
    assert corpus.decode(corpus.encode("é")) == "??"  # two UTF-8 bytes outside ASCII: two OTHER ids
    with pytest.raises(ValueError, match=r"ids must be integers in \[0, 98\)"):
        corpus.decode([98])
    with pytest.raises(TypeError, match="data must be bytes"):
        corpus.encode(3)


def test_windows_come_from_the_right_split_and_one_file():
    texts = {name: [corpus.decode(corpus.load(name).file(n)) for n in corpus.load(name).names] for name in corpus.SPLITS}
    for name, other in (("train", "held_out"), ("held_out", "train")):
        w = np.asarray(corpus.sample_windows(corpus.load(name), jax.random.key(1), 16, 200))
        assert w.shape == (16, 200) and w.dtype == np.int32
        rows = list(map(corpus.decode, w))
        assert all(any(row in t for t in texts[name]) for row in rows)  # each inside one file of its split
        # Real code repeats itself across files (licence headers, idioms), so a few windows may occur in the other
        # split too; most do not.
        assert sum(any(row in t for t in texts[other]) for row in rows) <= 4
    again = corpus.sample_windows(corpus.load("train"), jax.random.key(1), 16, 200)
    assert np.array_equal(np.asarray(again), np.asarray(corpus.sample_windows(corpus.load("train"), jax.random.key(1), 16, 200)))


def test_window_starts_stay_inside_files():
    split = corpus.load("held_out")
    starts = split.window_starts(1000)
    ends = split.starts[1:]
    file_of = np.searchsorted(split.starts, starts, side="right") - 1
    assert np.all(starts + 1000 <= ends[file_of])


def test_bad_inputs_raise_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="split must be one of"):
        corpus.load("test")
    split = corpus.load("held_out")
    with pytest.raises(TypeError, match="split must be a corpus Split"):
        corpus.sample_windows(np.zeros(5), jax.random.key(0), 2, 3)
    with pytest.raises(TypeError, match="key"):
        corpus.sample_windows(split, 0, 2, 3)
    with pytest.raises(ValueError, match="batch"):
        corpus.sample_windows(split, jax.random.key(0), 0, 3)
    with pytest.raises(ValueError, match="no file of the 'held_out' split holds"):
        split.window_starts(10**7)
    with pytest.raises(FileNotFoundError, match="missing"):
        corpus.load("train", folder=tmp_path)
    # A changed byte fails the hash check.
    for name in ("manifest.json", "LICENSE"):
        shutil.copy(corpus.FOLDER / name, tmp_path / name)
    data = bytearray(lzma.decompress((corpus.FOLDER / "stdlib.txt.xz").read_bytes()))
    data[1000] ^= 1
    (tmp_path / "stdlib.txt.xz").write_bytes(lzma.compress(bytes(data)))
    with pytest.raises(ValueError, match="has SHA-256 .* expected 5059cf7b"):
        corpus.load("train", folder=tmp_path)
    (tmp_path / "stdlib.txt.xz").write_bytes(b"not xz")
    with pytest.raises(ValueError, match="not a valid xz file"):
        corpus.load("train", folder=tmp_path)
