"""The checking machinery behind every chapter's exercises.

An :class:`Exercise` holds a reference answer and, for a function, a generator of random inputs.
:func:`check` runs a reader's answer against the reference and prints, in the page's language
(the one set by ``plotting.setup``), either a confirmation or the first failing case: the input,
the expected and the received output. For an exercise whose answer is a number or a choice, it
never prints the expected value: that would be the solution.

When a wrong answer matches one of the exercise's known :class:`Mistake` s (a softmax over the wrong
axis, a mask that hides the diagonal, ...), more lines name the mistake. Every line an English message prints
itself fits a phone's output column (PHONE_COLUMNS); a Japanese message keeps each sentence on one line, which the
page wraps. Every message, the
errors raised for a wrong exercise id or language included, exists in both languages.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import math
import numbers
import pkgutil
import re
import unicodedata
from typing import Any, Callable, Sequence

import jax
import numpy as np

from attnbook import plotting

Inputs = Callable[[np.random.Generator], dict[str, Any]]

_REGISTRY: dict[str, "Exercise"] = {}


def _error(en: str, ja: str) -> ValueError:
    """A ValueError whose message is in both languages (it may be raised before a language is known)."""
    return ValueError(f"{en} / {ja}")


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A common wrong answer to an exercise, and the sentence that names it, in both languages.

    en, ja: the sentence (printed below ``✗ N.k: a common mistake:`` / ``✗ N.k：よくある間違いです。``, the English
        wrapped to a phone's width, the Japanese on one line); the two print the same numbers.
    answer: the mistake itself. For a function exercise, the reference with the mistake applied (same
        arguments): a wrong answer matches when it agrees with this function on every input of the
        check, the failing one included. For a number, the mistaken value (or a function of no arguments
        that returns it), matched within ``rtol``/``atol`` (the exercise's when None). For a choice, the
        mistaken choice.
    matches: instead of ``answer``, a predicate. For a function exercise, ``matches(inputs, expected,
        got)`` on the failing input (e.g. NaN where the reference is finite: an overflow); for a number or
        a choice, ``matches(value)``.
    """

    en: str
    ja: str
    answer: Any = None
    matches: Callable[..., bool] | None = None
    rtol: float | None = None
    atol: float | None = None

    def __post_init__(self):
        if (self.answer is None) == (self.matches is None):
            raise _error("a Mistake needs exactly one of answer and matches",
                         "Mistake には answer と matches のどちらか一方だけを与えてください")


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One exercise with a checkable answer.

    id: ``"chapter.number"``, e.g. ``"3.2"``.
    kind: ``"function"`` (the answer is a function, compared with ``reference`` on inputs),
        ``"number"`` (a value, compared with ``reference()`` within ``rtol``/``atol``) or
        ``"choice"`` (a value from ``choices``, compared with ``reference()`` exactly).
    reference: the reference function (kind ``"function"``), or a function of no arguments that
        returns the expected value, computed only when a check asks for it.
    inputs: for a function, draws one set of keyword arguments from a NumPy generator.
    edge_cases: fixed keyword arguments tried before the random ones (e.g. T = 1).
    cases: how many random inputs are drawn.
    compare: replaces the default comparison (same structure and shapes, ``allclose``) of the
        reference's and the answer's outputs; returns True when they agree.
    mistakes: the common wrong answers, each a :class:`Mistake`; the first that a wrong answer matches
        is named in the message.
    """

    id: str
    kind: str
    reference: Callable[..., Any]
    inputs: Inputs | None = None
    edge_cases: Sequence[dict[str, Any]] = ()
    cases: int = 5
    rtol: float = 1e-4
    atol: float = 1e-5
    choices: Sequence[Any] = ()
    compare: Callable[[Any, Any], bool] | None = None
    mistakes: Sequence[Mistake] = ()

    def __post_init__(self):
        if self.kind not in ("function", "number", "choice"):
            raise _error(f"kind must be 'function', 'number' or 'choice', got {self.kind!r}",
                         f"kind は 'function'、'number'、'choice' のどれかです。渡されたもの：{self.kind!r}")
        if self.kind == "function" and self.inputs is None and not self.edge_cases:
            raise _error(f"exercise {self.id}: a function exercise needs inputs or edge_cases",
                         f"演習 {self.id}：関数の演習には inputs か edge_cases が必要です")
        if self.kind == "choice" and not self.choices:
            raise _error(f"exercise {self.id}: a choice exercise needs choices",
                         f"演習 {self.id}：選択式の演習には choices が必要です")


@dataclasses.dataclass(frozen=True)
class Result:
    """What :func:`check` found: whether the answer passed, and the message it prints."""

    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed


def normal(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> jax.Array:
    """A float32 JAX array of the given shape with N(0, scale^2) entries: the inputs most exercises draw."""
    return jax.numpy.asarray(scale * rng.normal(size=shape), dtype=jax.numpy.float32)


def register(*exercises: Exercise) -> None:
    """Add exercises to the registry that :func:`check` reads (ids must be new)."""
    for exercise in exercises:
        if exercise.id in _REGISTRY:
            raise _error(f"exercise {exercise.id} is registered twice", f"演習 {exercise.id} が 2 回登録されています")
        _REGISTRY[exercise.id] = exercise


APPENDICES = {"B": "bugs"}
"""The appendices with exercises: the appendix's letter in the book (Quarto's, in the order of _quarto-en.yml's
``appendices``: tests/book/test_exercises.py checks it) and the module that registers them. Their ids are ``"B.1"``,
``"B.2"``, ... as a chapter's are ``"3.1"``."""


def _module_names(chapter: int | str | None) -> list[str]:
    import attnbook.exercises as package

    if chapter is None:
        return [m.name for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("chapter")] + \
            list(APPENDICES.values())
    if isinstance(chapter, str) and not chapter.isdigit():
        return [APPENDICES[chapter]] if chapter in APPENDICES else []
    return [f"chapter{int(chapter)}"]


def _load(chapter: int | str | None) -> None:
    """Import the module of `chapter` (a number, or an appendix's letter; every module if None), which
    registers its exercises.

    Loaded on first use, so that a chapter's notebook imports only its own chapter's references
    (and the library modules they need), not those of the whole book.
    """
    for name in _module_names(chapter):
        if importlib.util.find_spec(f"attnbook.exercises.{name}") is not None:
            importlib.import_module(f"attnbook.exercises.{name}")


def _order(exercise_id: str) -> tuple:
    """Chapters in their order, then appendices by letter; exercises by number within each."""
    head, number = exercise_id.split(".")
    return (0, int(head), "", int(number)) if head.isdigit() else (1, 0, head, int(number))


def _known(chapter: str) -> bool:
    return chapter.isdigit() or chapter in APPENDICES


def exercise_ids(chapter: int | str | None = None) -> list[str]:
    """The registered ids, in order; only those of `chapter` (a number, or an appendix's letter) when it is given."""
    _load(chapter)
    ids = sorted(_REGISTRY, key=_order)
    return [i for i in ids if chapter is None or i.split(".")[0] == str(chapter)]


def get(exercise_id: str, *, lang: str | None = None) -> Exercise:
    """The exercise with this id; a ValueError lists the ids of its chapter if there is none (in `lang`,
    by default the page's language)."""
    chapter = str(exercise_id).split(".")[0] if isinstance(exercise_id, str) else ""
    if _known(chapter):
        _load(chapter)
    if not isinstance(exercise_id, str) or exercise_id not in _REGISTRY:
        chapter = str(exercise_id).split(".")[0]
        known = exercise_ids(chapter) if _known(chapter) else exercise_ids()
        lang = plotting.language() if lang is None else lang
        raise ValueError(_say("unknown_id", lang, known=known, got=repr(exercise_id)))
    return _REGISTRY[exercise_id]


# ---------------------------------------------------------------------------------------------
# Messages, in both languages. Each pair prints the same numbers in the same order (the twins'
# outputs are compared number by number).

# The verdict is on its own line and the detail below it, indented. An English message's fixed lines fit a phone:
# at most PHONE_COLUMNS display columns, and a mistake's sentence is wrapped to that width at spaces (:func:`_wrap`).
# A Japanese message keeps each sentence on one line: the page wraps a check's output on every screen
# (site/exercise-output.lua marks the cell, site/book.css wraps it) and Jupyter wraps output lines too, while a
# break by hand at 37 columns split Japanese mid-sentence (「1 番目の入力（全 7 通り）で」 / 「関数が None を返しました。」).
# What a reader's answer puts in (an error, an array) may be longer.
PHONE_COLUMNS = 37

_MESSAGES = {
    "pass": ("✓ {id}: correct on all {n} inputs.", "✓ {id}：全 {n} 通りの入力で正解です。"),
    "pass_value": ("✓ {id}: correct.", "✓ {id}：正解です。"),
    "fail": ("✗ {id}: wrong on input {i} of {n}.", "✗ {id}：{i} 番目の入力（全 {n} 通り）で答えが違います。"),
    "raised": ("✗ {id}: your function raised an error\n  on input {i} of {n}:\n  {error}",
               "✗ {id}：関数がエラーを出しました。\n  {i} 番目の入力（全 {n} 通り）：\n  {error}"),
    "input": ("  input:", "  入力："),
    "expected": ("  expected:", "  期待される値："),
    "got": ("  got:", "  答え："),
    "shape": ("  (expected shape {expected},\n  got shape {got})", "  （期待される形は {expected}、答えの形は {got}）"),
    "dtype": ("  (expected dtype {expected},\n  got dtype {got})",
              "  （期待される dtype は {expected}、答えの dtype は {got}）"),
    "returned_none": ("✗ {id}: is your function written yet?\n  It returned None on input {i} of {n}.",
                      "✗ {id}：まだ実装していないのでは？\n  {i} 番目の入力（全 {n} 通り）で関数が None を返しました。"),
    "unanswered": ("✗ {id}: no answer yet.\n  Replace the ... with yours.",
                   "✗ {id}：まだ答えがありません。\n  ... を答えに置き換えてください。"),
    "not_function": ("✗ {id}: answer must be a function;\n  got {got}.",
                     "✗ {id}：答えは関数で渡してください。\n  渡されたもの：{got}"),
    "not_number": ("✗ {id}: answer must be a number;\n  got {got}.",
                   "✗ {id}：答えは数で渡してください。\n  渡されたもの：{got}"),
    "too_large": ("✗ {id}: {got} is too large.", "✗ {id}：{got} は大きすぎます。"),
    "too_small": ("✗ {id}: {got} is too small.", "✗ {id}：{got} は小さすぎます。"),
    "not_choice": ("✗ {id}: answer must be one of\n  {choices}; got {got}.",
                   "✗ {id}：答えは {choices} のどれかです。\n  渡されたもの：{got}"),
    "wrong_choice": ("✗ {id}: {got} is not the answer;\n  look again at what the chapter\n  measured.",
                     "✗ {id}：{got} ではありません。\n  章で測った結果をもう一度見てください。"),
    "mistake": ("✗ {id}: a common mistake:\n{what}", "✗ {id}：よくある間違いです。\n{what}"),
    "unknown_id": ("exercise_id must be one of {known}, got {got}",
                   "exercise_id は {known} のどれかです。渡されたもの：{got}"),
}


def _columns(text: str) -> int:
    """Display columns of a line: an East Asian wide or full-width character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


_HIRAGANA = re.compile(r"[\u3041-\u309f]")
_OPERATORS = "=<>+-*/^"
_NO_BREAK_BEFORE = "、。，．：；）」』！？ー・…ぁぃぅぇぉっゃゅょァィゥェォッャュョ"


def _wrap(text: str, width: int = PHONE_COLUMNS, indent: str = "  ") -> str:
    """`text` as lines of at most `width` columns, each starting with `indent`, broken between words.

    English breaks at spaces. Japanese also breaks after 「、」「。」「：」 and where hiragana (a particle or an
    ending) meets the next word (kanji, katakana, a Latin letter, an opening bracket); never before closing
    punctuation or a particle, nor next to an operator: at phrase boundaries, so no line ends inside a word or
    a formula. A word wider than the line stays whole.
    """
    pieces, start = [], 0
    for i in range(1, len(text)):
        a, b = text[i - 1], text[i]
        if b in _NO_BREAK_BEFORE or a in "（「『":
            continue
        if a == " " and (b in _OPERATORS or (i > 1 and text[i - 2] in _OPERATORS)):
            continue  # a formula stays on one line: "j <= i", not "j" / "<= i"
        if a == " " and _HIRAGANA.match(b):
            continue  # a particle stays with its word: "グループ g は", not "グループ g" / "は"
        if a == " " or a in "、。：" or (_HIRAGANA.match(a) and not _HIRAGANA.match(b) and b != " "):
            pieces.append(text[start:i])
            start = i
    pieces.append(text[start:])
    lines, line = [], ""
    for piece in pieces:
        if line and _columns(indent + (line + piece).rstrip()) > width:
            lines.append(line.rstrip())
            line = piece.lstrip()
        else:
            line += piece
    lines.append(line.rstrip())
    return "\n".join(indent + line for line in lines)


def _mistake_lines(mistake: Mistake, lang: str) -> str:
    """A mistake's sentence below its verdict, indented: wrapped to PHONE_COLUMNS in English, one line in Japanese
    (the page wraps it; see PHONE_COLUMNS)."""
    return "  " + mistake.ja if lang == "ja" else _wrap(mistake.en)


def _say(key: str, lang: str, **fields) -> str:
    en, ja = _MESSAGES[key]
    return (ja if lang == "ja" else en).format(**fields)


def _show(value: Any) -> str:
    """A short, readable rendering of an input or output (arrays to 3 decimals)."""
    if isinstance(value, (np.ndarray, jax.Array)):
        array = np.asarray(value)
        # NumPy's own defaults but 3 decimals, whatever the reader's np.set_printoptions (chapter 1 sets fixed decimals)
        with np.printoptions(precision=3, suppress=True, threshold=64, edgeitems=3, floatmode="maxprec", sign="-",
                             linewidth=75, legacy=False):
            return np.array2string(array)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):  # nested lists of numbers print as the array they stand for
        try:
            array = np.asarray(value)
        except (ValueError, TypeError):  # ragged
            array = None
        if array is not None and (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
            return "list " + _show(array)
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    return repr(value)


def _show_inputs(kwargs: dict[str, Any], lang: str) -> str:
    """The arguments of a failing case, ``name = value``, separated by ``; `` (「、」 in Japanese)."""
    return ("、" if lang == "ja" else "; ").join(f"{name} = {_show(value)}" for name, value in kwargs.items())


def _line(label: str, text: str) -> str:
    """A labelled line; a value of several lines goes below its label, indented."""
    if "\n" in text:
        return label + "\n" + "\n".join("    " + row for row in text.splitlines())
    return label + ("" if label.endswith("：") else " ") + text  # a full-width colon has its own space


def _as_reference(expected: Any, got: Any) -> Any:
    """A reader's containers read the way the reference's are: a list where the reference has a tuple is
    that tuple (a pair returned as ``[out, weights]`` is the pair), a list where it has an array is that array."""
    if isinstance(got, list) and isinstance(expected, tuple) and len(got) == len(expected):
        return tuple(_as_reference(e, g) for e, g in zip(expected, got))
    if isinstance(got, tuple) and isinstance(expected, tuple) and len(got) == len(expected):
        return tuple(_as_reference(e, g) for e, g in zip(expected, got))
    if isinstance(got, list) and not isinstance(expected, (list, tuple)):
        try:
            return np.asarray(got)
        except (ValueError, TypeError):  # ragged: left as it is, and found unequal
            return got
    return got


def _agree(exercise: Exercise, expected: Any, got: Any) -> tuple[bool, str]:
    """Whether `got` matches `expected`, and a hint when the shapes or the kind of values differ."""
    if exercise.compare is not None:
        return bool(exercise.compare(expected, got)), ""
    want, want_tree = jax.tree_util.tree_flatten(expected)
    have, have_tree = jax.tree_util.tree_flatten(_as_reference(expected, got))
    if want_tree != have_tree:
        return False, ""
    for w, h in zip(want, have):
        w, h = np.asarray(w), np.asarray(h)
        if h.dtype == object:  # Fractions, Decimals, SymPy numbers: compared as the floats they are
            h = h.astype(float)
        if w.shape != h.shape:
            return False, f"shape|{w.shape}|{h.shape}"
        if (w.dtype == bool) != (h.dtype == bool):  # a 0/1 array is not a mask
            return False, f"dtype|{w.dtype}|{h.dtype}"
        if w.dtype == bool:
            if not np.array_equal(w, h):
                return False, ""
        elif not np.allclose(h, w, rtol=exercise.rtol, atol=exercise.atol, equal_nan=True):
            return False, ""
    return True, ""


def _check_function(exercise: Exercise, answer: Any, lang: str, seed: int) -> Result:
    ident = exercise.id
    if not callable(answer):
        return Result(False, _say("not_function", lang, id=ident, got=_show(answer)))
    rng = np.random.default_rng(seed)
    # Edge cases first: they are small, so a failure among them is the easiest to read.
    cases = [dict(case) for case in exercise.edge_cases]
    cases += [exercise.inputs(rng) for _ in range(exercise.cases if exercise.inputs else 0)]
    n = len(cases)
    outputs = []  # the answer's output on each case so far, for the mistakes to compare with
    for i, kwargs in enumerate(cases, start=1):
        expected = exercise.reference(**kwargs)
        try:
            got = answer(**kwargs)
        except Exception as error:  # the reader's bug is reported, not raised: "Run all" goes on
            message = _say("raised", lang, id=ident, i=i, n=n, error=f"{type(error).__name__}: {error}")
            return Result(False, message + "\n" + _line(_say("input", lang), _show_inputs(kwargs, lang)))
        if got is None and expected is not None:
            return Result(False, _say("returned_none", lang, id=ident, i=i, n=n))
        try:
            same, hint = _agree(exercise, expected, got)
        except (TypeError, ValueError):  # e.g. an array of Fractions: not comparable with numbers
            same, hint = False, ""
        if not same:
            lines = [_say("fail", lang, id=ident, i=i, n=n),
                     _line(_say("input", lang), _show_inputs(kwargs, lang)),
                     _line(_say("expected", lang), _show(expected)),
                     _line(_say("got", lang), _show(got))]
            if hint:
                what, want, have = hint.split("|")
                lines.append(_say(what, lang, expected=want, got=have))
            mistake = _function_mistake(exercise, answer, cases, outputs + [got], expected)
            if mistake is not None:
                lines.append(_say("mistake", lang, id=ident, what=_mistake_lines(mistake, lang)))
            return Result(False, "\n".join(lines))
        outputs.append(got)
    return Result(True, _say("pass", lang, id=ident, n=n))


def _function_mistake(exercise: Exercise, answer: Callable, cases: list[dict], outputs: list[Any],
                      expected: Any) -> Mistake | None:
    """The first of the exercise's mistakes that the wrong answer matches, or None.

    `outputs` are the answer's outputs on the first cases, the last one the failing case. A mistake given
    as a function matches when the answer agrees with it on every case of the check (so a different bug that
    happens to agree on the failing case alone is not named); a predicate is asked about the failing case.
    """
    failing = len(outputs) - 1

    def answer_on(i):
        while len(outputs) <= i:  # the cases after the failing one, run only when a mistake asks for them
            try:
                outputs.append(answer(**cases[len(outputs)]))
            except Exception:
                outputs.append(_FAILED)
        return outputs[i]

    for mistake in exercise.mistakes:
        try:
            if mistake.matches is not None:
                if mistake.matches(dict(cases[failing]), expected, outputs[failing]):
                    return mistake
                continue
            order = [failing] + [i for i in range(len(cases)) if i != failing]
            if all(_same_output(exercise, mistake.answer(**cases[i]), answer_on(i)) for i in order):
                return mistake
        except Exception:  # a mistake that cannot be evaluated on these inputs names nothing
            continue
    return None


_FAILED = object()


def _same_output(exercise: Exercise, mistaken: Any, got: Any) -> bool:
    if got is _FAILED or got is None:
        return False
    try:
        with np.errstate(all="ignore"):
            return _agree(exercise, mistaken, got)[0]
    except (TypeError, ValueError):
        return False


def _value_mistake(exercise: Exercise, answer: Any, value: float | None = None) -> Mistake | None:
    """The first mistake that a wrong number (`value`) or choice (`answer`) matches, or None."""
    for mistake in exercise.mistakes:
        if mistake.matches is not None:
            try:
                if mistake.matches(value if exercise.kind == "number" else answer):
                    return mistake
            except Exception:
                pass
            continue
        wrong = mistake.answer() if callable(mistake.answer) else mistake.answer
        if exercise.kind == "choice":
            if _same_choice(answer, wrong):
                return mistake
        elif value is not None and not math.isnan(value) and math.isclose(
                value, float(wrong), rel_tol=exercise.rtol if mistake.rtol is None else mistake.rtol,
                abs_tol=exercise.atol if mistake.atol is None else mistake.atol):
            return mistake
    return None


def _with_mistake(exercise: Exercise, result: Result, mistake: Mistake | None, lang: str) -> Result:
    if mistake is None:
        return result
    line = _say("mistake", lang, id=exercise.id, what=_mistake_lines(mistake, lang))
    return Result(result.passed, result.message + "\n" + line)


def _check_value(exercise: Exercise, answer: Any, lang: str) -> Result:
    ident = exercise.id
    if exercise.kind == "choice":
        if not any(_same_choice(answer, c) for c in exercise.choices):
            return Result(False, _say("not_choice", lang, id=ident, choices=list(exercise.choices),
                                      got=_show(answer)))
        if _same_choice(answer, exercise.reference()):
            return Result(True, _say("pass_value", lang, id=ident))
        return _with_mistake(exercise, Result(False, _say("wrong_choice", lang, id=ident, got=_show(answer))),
                             _value_mistake(exercise, answer), lang)
    if isinstance(answer, (bool, np.bool_)) or not isinstance(answer, (numbers.Real, np.number)) \
            and not (isinstance(answer, (np.ndarray, jax.Array)) and np.ndim(answer) == 0):
        return Result(False, _say("not_number", lang, id=ident, got=_show(answer)))
    value, expected = float(answer), exercise.reference()
    if math.isnan(value):
        return _with_mistake(exercise, Result(False, _say("not_number", lang, id=ident, got="nan")),
                             _value_mistake(exercise, answer, value), lang)
    if math.isclose(value, float(expected), rel_tol=exercise.rtol, abs_tol=exercise.atol):
        return Result(True, _say("pass_value", lang, id=ident))
    key = "too_large" if value > float(expected) else "too_small"
    return _with_mistake(exercise, Result(False, _say(key, lang, id=ident, got=_show(answer))),
                         _value_mistake(exercise, answer, value), lang)


def _same_choice(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return type(a) is type(b) and a == b


def result(exercise_id: str, answer: Any, *, lang: str | None = None, seed: int = 0) -> Result:
    """Check `answer` against exercise `exercise_id` and return the :class:`Result` (no printing)."""
    lang = plotting.language() if lang is None else lang
    if lang not in plotting.LANGUAGES:
        raise _error(f"lang must be one of {plotting.LANGUAGES}, got {lang!r}",
                     f"lang は {plotting.LANGUAGES} のどれかです。渡されたもの：{lang!r}")
    exercise = get(exercise_id, lang=lang)
    if answer is Ellipsis:  # the starter cell, not yet edited
        return Result(False, _say("unanswered", lang, id=exercise.id))
    if exercise.kind == "function":
        return _check_function(exercise, answer, lang, seed)
    return _check_value(exercise, answer, lang)


def check(exercise_id: str, answer: Any, *, lang: str | None = None, seed: int = 0) -> None:
    """Check a reader's answer to exercise `exercise_id` and print what was found.

    A function is run on random inputs (drawn with ``seed``) and on the exercise's edge cases and
    compared with the reference; the first failing input is printed with the expected and the
    received output. A number or a choice is compared with the reference value, which is never
    printed; when the answer matches one of the exercise's common mistakes, one more line names it.
    Messages are in the page's language (``plotting.setup``) unless `lang` is given (``"en"`` or ``"ja"``).
    Nothing is raised for a wrong answer, so "Run all" goes on past an unfinished exercise.
    """
    print(result(exercise_id, answer, lang=lang, seed=seed).message)
