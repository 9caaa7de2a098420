"""Build chapter 11's corpus: a fixed subset of CPython's standard-library source, stored compressed.

    python -m tools.make_stdlib_corpus                       # from the running interpreter's standard library
    python -m tools.make_stdlib_corpus --stdlib /usr/lib/python3.11 --out /tmp/corpus   # another CPython, elsewhere
    python -m tools.make_stdlib_corpus --check               # rebuild in memory, compare with the shipped corpus

The rule that picks the files, so that any CPython gives its own version of the same corpus:

- every top-level module file ``<stdlib>/<name>.py`` (no packages, no sub-directories) whose ``<name>`` is in
  ``sys.stdlib_module_names`` (so a distribution's additions such as Debian's ``sitecustomize.py`` are left out)
  and does not start with ``_`` (private and build-specific modules: ``_sysconfigdata_*``, ``_pydecimal``, ...);
- files in sorted order of their names, concatenated byte for byte, nothing added between them.

The split is by file, by a hash rule that does not depend on the file list: a file is **held out** when the first
byte of ``SHA-256(file name, UTF-8)`` is below 26 (about 10 % of files), otherwise it is a **training** file.

The shipped corpus (``lib/attnbook/stdlib_corpus/``) was built from CPython 3.11.7's ``Lib/`` (the interpreter of the
book's environment): 151 files, 4,198,016 bytes, 15 of them (364,234 bytes) held out. It holds

- ``stdlib.txt.xz``: the concatenated bytes, xz-compressed (about 0.8 MB);
- ``manifest.json``: the Python version, the rule above, and each file's name, split and size in bytes (the
  offsets follow from the sizes);
- ``LICENSE``: the Python Software Foundation licence of that CPython (its ``LICENSE.txt``), which covers the text.

``attnbook.corpus`` reads it and checks the SHA-256 of the uncompressed bytes against ``attnbook.corpus.SHA256``.
A corpus built from another CPython version differs (the standard library changes between versions) and so fails
that check: the book's runs use the shipped bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import pathlib
import sys
import sysconfig

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "lib" / "attnbook" / "stdlib_corpus"
HELD_OUT_BELOW = 26
"""A file is held out when the first byte of SHA-256(name) is below this (26 / 256: about 10 % of files)."""
RULE = ("top-level <name>.py files of the standard library with <name> in sys.stdlib_module_names and not "
        "starting with '_', sorted by name and concatenated; held out: first byte of SHA-256(file name) < 26")


def held_out(name: str) -> bool:
    """The split rule: True for a held-out file (by its name alone)."""
    return hashlib.sha256(name.encode("utf-8")).digest()[0] < HELD_OUT_BELOW


def stdlib_files(stdlib: pathlib.Path) -> list[pathlib.Path]:
    """The files the rule picks from the standard-library folder ``stdlib``, sorted by name."""
    if not stdlib.is_dir():
        raise FileNotFoundError(f"no standard-library folder at {stdlib}")
    files = sorted((p for p in stdlib.glob("*.py")
                    if p.stem in sys.stdlib_module_names and not p.stem.startswith("_")), key=lambda p: p.name)
    if not files:
        raise FileNotFoundError(f"{stdlib} holds no standard-library module files")
    return files


def build(stdlib: pathlib.Path) -> tuple[bytes, dict]:
    """``(corpus bytes, manifest)`` for the standard library at ``stdlib``."""
    files = stdlib_files(stdlib)
    chunks = [p.read_bytes() for p in files]
    data = b"".join(chunks)
    manifest = dict(
        python=sys.version.split()[0] if stdlib == pathlib.Path(sysconfig.get_paths()["stdlib"]) else "unknown",
        source=f"CPython standard library, {stdlib.name}/ (top-level modules)",
        rule=RULE,
        sha256=hashlib.sha256(data).hexdigest(),
        total_bytes=len(data),
        files=[dict(name=p.name, split="held_out" if held_out(p.name) else "train", bytes=len(c))
               for p, c in zip(files, chunks)],
    )
    return data, manifest


def licence(stdlib: pathlib.Path) -> str:
    """The PSF licence text of that CPython (its ``LICENSE.txt``)."""
    path = stdlib / "LICENSE.txt"
    if not path.is_file():
        raise FileNotFoundError(f"no LICENSE.txt in {stdlib}: the corpus must ship with the PSF licence")
    return path.read_text(encoding="utf-8")


def write(stdlib: pathlib.Path, out: pathlib.Path) -> dict:
    data, manifest = build(stdlib)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stdlib.txt.xz").write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    header = ("The text in stdlib.txt.xz is source code of the Python standard library (see manifest.json for the\n"
              "version and the files), copyright the Python Software Foundation, distributed under the licence\n"
              "below (the LICENSE.txt of that CPython installation).\n\n")
    (out / "LICENSE").write_text(header + licence(stdlib), encoding="utf-8")
    return manifest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stdlib", type=pathlib.Path, default=pathlib.Path(sysconfig.get_paths()["stdlib"]),
                        help="the standard-library folder (default: the running interpreter's)")
    parser.add_argument("--out", type=pathlib.Path, default=OUT, help=f"output folder (default {OUT})")
    parser.add_argument("--check", action="store_true", help="compare a fresh build with the shipped corpus")
    args = parser.parse_args(argv)
    if args.check:
        _, manifest = build(args.stdlib)
        shipped = json.loads((OUT / "manifest.json").read_text(encoding="utf-8"))
        same = manifest["sha256"] == shipped["sha256"]
        print(f"{args.stdlib}: {len(manifest['files'])} files, {manifest['total_bytes']} bytes, sha256 "
              f"{manifest['sha256'][:16]}... {'equals' if same else 'differs from'} the shipped corpus "
              f"(Python {shipped['python']})")
        return 0 if same else 1
    manifest = write(args.stdlib, args.out)
    held = [f for f in manifest["files"] if f["split"] == "held_out"]
    print(f"wrote {args.out}: {len(manifest['files'])} files, {manifest['total_bytes']} bytes, "
          f"{len(held)} held out ({sum(f['bytes'] for f in held)} bytes), sha256 {manifest['sha256']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
