"""The exercises: the checking machinery, and the rules every chapter's exercises follow.

Each chapter's deliberately wrong answers are in tests/book/test_exercises_chapterN.py; here:

- every exercise id used in a notebook is registered, and every registered id is used, in both
  languages, with a starter cell (tagged so that nbval does not judge it) and a solution cell in a
  collapsed callout whose stored output is the check's confirmation;
- each reference passes its own check;
- check() reports a wrong answer with the failing input, in the page's language, and never prints
  the expected value of a number or a choice;
- every exercise knows at least one common mistake; each chapter's file gives, for every mistake, the
  mistaken answer itself, which check must name (``mistakes_named``); a correct answer and an unrelated wrong
  answer get no such line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import exercises, plotting
from attnbook.exercises import Exercise, _core
from tools.sitecheck import CHECK_CALL, SOLUTION_TITLE as TITLE

ROOT = Path(__file__).resolve().parents[2]
STARTER_TAGS = {"exercise-starter", "nbval-skip"}
CALLOUT = re.compile(r"""^:::\s*\{\.callout-tip[^}]*collapse="true"[^}]*title="(?P<title>[^"]+)"\}""")
CHAPTERS = sorted(p.name for p in (ROOT / "chapters" / "en").glob("[0-9][0-9]-*.ipynb"))
APPENDICES = {"B": "bugs.ipynb"}  # appendix letter -> notebook, for the appendices that have exercises
PAGES = [(int(name[:2]), name) for name in CHAPTERS] + list(APPENDICES.items())


def cells(lang: str, name: str) -> list[dict]:
    nb = json.loads((ROOT / "chapters" / lang / name).read_text(encoding="utf-8"))
    return nb["cells"]


def text(cell: dict) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def stdout(cell: dict) -> str:
    return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def exercise_cells(lang: str, name: str) -> tuple[dict[str, int], dict[str, int]]:
    """(id -> index of its starter cell, id -> index of its solution cell) in one notebook."""
    starters, solutions = {}, {}
    for i, cell in enumerate(cells(lang, name)):
        if cell["cell_type"] != "code":
            continue
        for m in CHECK_CALL.finditer(text(cell)):
            where = starters if "exercise-starter" in tags(cell) else solutions
            assert m["id"] not in where, f"{lang}/{name}: exercise {m['id']} is checked in two such cells"
            where[m["id"]] = i
    return starters, solutions


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize(("chapter", "name"), PAGES)
def test_every_registered_exercise_is_in_its_chapter_with_starter_and_solution(lang, chapter, name):
    starters, solutions = exercise_cells(lang, name)
    registered = exercises.exercise_ids(chapter)
    fewest = 3 if isinstance(chapter, int) else 1  # an appendix may have one or two
    assert fewest <= len(registered) <= 5, f"chapter {chapter} has {len(registered)} exercises, not {fewest}-5"
    assert sorted(starters, key=_core._order) == registered, f"{lang}/{name}: starter cells for {sorted(starters)}"
    assert sorted(solutions, key=_core._order) == registered, f"{lang}/{name}: solution cells for {sorted(solutions)}"
    notebook = cells(lang, name)
    for ident in registered:
        starter, solution = notebook[starters[ident]], notebook[solutions[ident]]
        assert STARTER_TAGS <= tags(starter), f"{lang}/{name}: starter of {ident} needs tags {STARTER_TAGS}"
        assert starters[ident] < solutions[ident], f"{lang}/{name}: the solution of {ident} comes before its starter"
        # The solution sits inside a collapsed callout: an opening markdown cell before it (with only
        # solution code cells in between) and a closing ":::" after it.
        opening = max(i for i in range(solutions[ident]) if notebook[i]["cell_type"] == "markdown")
        m = CALLOUT.match(text(notebook[opening]).strip())
        assert m, f"{lang}/{name}: the solution of {ident} is not inside a collapsed callout-tip"
        assert m["title"] == TITLE[lang].format(id=ident), f"{lang}/{name}: callout title {m['title']!r}"
        closing = min(i for i in range(solutions[ident] + 1, len(notebook)) if notebook[i]["cell_type"] == "markdown")
        assert text(notebook[closing]).strip().startswith(":::"), f"{lang}/{name}: callout of {ident} not closed"
        assert "nbval-skip" not in tags(solution) and "nbval-ignore-output" not in tags(solution), \
            f"{lang}/{name}: nbval must run and compare the solution of {ident}"
        assert stdout(solution).startswith((f"✓ {ident}:", f"✓ {ident}：")), \
            f"{lang}/{name}: the stored output of solution {ident} is not a pass: {stdout(solution)[:200]!r}"


@pytest.mark.parametrize("ident", exercises.exercise_ids())
def test_reference_passes_its_own_check(ident):
    exercise = exercises.get(ident)
    answer = exercise.reference if exercise.kind == "function" else exercise.reference()
    found = exercises.result(ident, answer, lang="en")
    assert found.passed, found.message


def test_every_chapter_has_a_wrong_answer_test():
    for chapter, _ in PAGES:
        module = f"chapter{chapter}" if isinstance(chapter, int) else _core.APPENDICES[chapter]
        path = ROOT / "tests" / "book" / f"test_exercises_{module}.py"
        assert path.exists(), f"{path.name} is missing: it gives a wrong answer for each exercise of chapter {chapter}"


def wrong_answers_rejected(wrong: dict, chapter: int) -> None:
    """For the per-chapter tests: `wrong` maps each id of `chapter` to a deliberately wrong answer,
    and each one is rejected with a message in both languages."""
    assert sorted(wrong, key=_core._order) == exercises.exercise_ids(chapter), "one wrong answer per exercise"
    for ident, answer in wrong.items():
        for lang, colon in (("en", ":"), ("ja", "：")):  # the Japanese message has a full-width colon
            found = exercises.result(ident, answer, lang=lang)
            assert not found.passed, f"{ident}: a wrong answer passed"
            assert found.message.startswith(f"✗ {ident}{colon}"), found.message
        if exercises.get(ident).kind != "function":
            value = exercises.get(ident).reference()
            assert repr(value) not in found.message and str(value) not in re.split("[:：]", found.message, 1)[1], \
                f"{ident}: the message gives the answer away: {found.message}"


def _named_mistake(message: str, lang: str) -> str | None:
    """The sentence printed below the line "✗ N.k: a common mistake:", its lines joined (None if there is none)."""
    head = "よくある間違いです。" if lang == "ja" else "a common mistake:"
    lines = message.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("✗ ") and line.endswith(head)]
    if not starts:
        return None
    body = [line.strip() for line in lines[starts[-1] + 1:]]
    assert all(line.startswith("  ") for line in lines[starts[-1] + 1:]), message
    return "".join(body) if lang == "ja" else " ".join(body)


def mistakes_named(named: dict, chapter: int) -> None:
    """For the per-chapter tests: `named` maps each id of `chapter` to a list of mistaken answers, one per
    Mistake of the exercise, in their order; check must reject each and end with the line naming that mistake,
    in both languages, without giving a number's or a choice's value away."""
    assert sorted(named, key=_core._order) == exercises.exercise_ids(chapter), "mistaken answers for every exercise"
    for ident, answers in named.items():
        exercise = exercises.get(ident)
        assert len(answers) == len(exercise.mistakes) >= 1, f"{ident}: one mistaken answer per mistake"
        for mistake, answer in zip(exercise.mistakes, answers):
            for lang, sentence in (("en", mistake.en), ("ja", mistake.ja)):
                found = exercises.result(ident, answer, lang=lang)
                assert not found.passed, f"{ident}: the mistaken answer passed"
                named = _named_mistake(found.message, lang)
                # Japanese lines are joined without the space a break at a space removed
                expected = sentence.replace(" ", "") if lang == "ja" else sentence
                assert named is not None and (named.replace(" ", "") if lang == "ja" else named) == expected, \
                    found.message
                if lang == "en":  # English fits a phone by its line breaks
                    wrapped = found.message.splitlines()[-1 - sum(1 for _ in _core._wrap(sentence).splitlines()):]
                    assert all(_core._columns(line) <= _core.PHONE_COLUMNS for line in wrapped), found.message
                else:  # Japanese keeps the sentence on one line; the page wraps it
                    assert found.message.splitlines()[-1] == "  " + sentence, found.message
            if exercise.kind != "function":
                value = str(exercise.reference())
                assert value not in mistake.en and value not in mistake.ja, f"{ident}: the mistake gives the answer away"


def unrelated(exercise: Exercise):
    """A wrong answer that is none of the exercise's mistakes: the reference's output moved (numbers scaled and
    shifted, booleans negated, integers plus one), or a number half as large again."""
    def move(x):
        if isinstance(x, (tuple, list)):
            return type(x)(move(part) for part in x)
        array = np.asarray(x)
        if array.dtype == bool:
            return ~array
        if np.issubdtype(array.dtype, np.integer):
            return array + 1
        return array * 1.37 + 0.1
    if exercise.kind == "function":
        return lambda **kwargs: move(exercise.reference(**kwargs))
    if exercise.kind == "number":
        return 1.5 * float(exercise.reference())
    return "not one of the choices"


@pytest.mark.parametrize("ident", exercises.exercise_ids())
def test_no_mistake_is_named_for_a_right_or_an_unrelated_answer(ident):
    exercise = exercises.get(ident)
    right = exercise.reference if exercise.kind == "function" else exercise.reference()
    texts = [m.en for m in exercise.mistakes]
    assert exercise.mistakes, f"{ident} names no common mistake"
    assert not any(t in exercises.result(ident, right, lang="en").message for t in texts)
    found = exercises.result(ident, unrelated(exercise), lang="en")
    assert not found.passed and not any(t in found.message for t in texts), found.message


# ---------------------------------------------------------------------------------------------
# The machinery, on exercises registered only for these tests.

@pytest.fixture
def scratch(monkeypatch):
    registry = dict(_core._REGISTRY)
    monkeypatch.setattr(_core, "_REGISTRY", registry)
    exercises.register(
        Exercise(id="99.1", kind="function", reference=lambda x: 2 * x,
                 inputs=lambda rng: {"x": jnp.asarray(rng.normal(size=3))}, edge_cases=({"x": jnp.zeros(1)},)),
        Exercise(id="99.2", kind="number", reference=lambda: 751, atol=0, rtol=0),
        Exercise(id="99.3", kind="choice", reference=lambda: "b", choices=("a", "b", "c")),
    )
    return registry


def test_function_pass_and_first_failing_case(scratch):
    assert exercises.result("99.1", lambda x: x + x).passed
    found = exercises.result("99.1", lambda x: x + 1, lang="en")
    assert not found.passed
    assert "wrong on input 1 of 6" in found.message and "x = [0.]" in found.message
    assert "expected: [0.]" in found.message and "got: [1.]" in found.message


def test_messages_follow_the_page_language(scratch):
    plotting.setup("ja")
    try:
        assert "番目の入力" in exercises.result("99.1", lambda x: x + 1).message
        assert exercises.result("99.1", lambda x: 2 * x).message == "✓ 99.1：全 6 通りの入力で正解です。"
    finally:
        plotting.setup("en")
    assert exercises.result("99.1", lambda x: 2 * x).message == "✓ 99.1: correct on all 6 inputs."


def test_japanese_messages_keep_each_sentence_on_one_line(scratch):
    # the page wraps a check's output (site/book.css); a break by hand split 「…で」 / 「関数が None を返しました。」
    ends = ("。", "？", "：", "）", "}")
    for key, (_, ja) in _core._MESSAGES.items():
        for line in ja.splitlines():
            assert line.rstrip().endswith(ends), f"{key}: {line!r} breaks inside a sentence"
    for answer in (lambda x: x + 1, lambda x: None, lambda x: x[:0]):
        message = exercises.result("99.1", answer, lang="ja").message
        assert not any(line.rstrip().endswith(("で", "、", "の", "を", "は", "が")) for line in message.splitlines()), message
    assert "1 番目の入力（全 6 通り）で関数が None を返しました。" in exercises.result("99.1", lambda x: None, lang="ja").message


def test_the_twins_print_the_same_numbers(scratch):
    for answer in (lambda x: 2 * x, lambda x: x + 1, lambda x: None, lambda x: 1 / 0, lambda x: x[:0]):
        en, ja = (exercises.result("99.1", answer, lang=lang).message for lang in ("en", "ja"))
        assert re.findall(r"\d+", en) == re.findall(r"\d+", ja), (en, ja)


def test_errors_none_shapes_and_non_functions_are_reported_not_raised(scratch):
    assert "raised an error\n  on input 1 of 6:\n  ZeroDivisionError" in exercises.result("99.1", lambda x: 1 / 0).message
    assert "returned None" in exercises.result("99.1", lambda x: None).message
    assert "expected shape (1,),\n  got shape (0,)" in exercises.result("99.1", lambda x: x[:0]).message
    assert "must be a function" in exercises.result("99.1", 3).message


def test_numbers_say_too_large_or_too_small_never_the_value(scratch):
    assert exercises.result("99.2", 751).passed and exercises.result("99.2", 751.0).passed
    large, small = exercises.result("99.2", 760).message, exercises.result("99.2", 700).message
    assert "too large" in large and "too small" in small
    assert "751" not in large + small
    assert "must be a number" in exercises.result("99.2", "751").message
    assert "must be a number" in exercises.result("99.2", True).message


def test_choices(scratch):
    assert exercises.result("99.3", "B").passed
    assert "is not the answer" in exercises.result("99.3", "a").message
    assert "must be one of" in exercises.result("99.3", "d").message


def test_unknown_ids_and_languages_are_errors(scratch):
    with pytest.raises(ValueError, match=r"exercise_id must be one of \['99.1', '99.2', '99.3'\], got '99.4'"):
        exercises.result("99.4", 1)
    with pytest.raises(ValueError, match=r"exercise_id は \['99.1', '99.2', '99.3'\] のどれかです。渡されたもの：'99.4'"):
        exercises.result("99.4", 1, lang="ja")
    with pytest.raises(ValueError, match="lang must be one of .* / lang は .* のどれかです"):
        exercises.result("99.1", 1, lang="de")
    with pytest.raises(ValueError, match="registered twice / 演習 99.1 が 2 回登録されています"):
        exercises.register(Exercise(id="99.1", kind="number", reference=lambda: 1))
    with pytest.raises(ValueError, match="kind must be .* / kind は"):
        Exercise(id="99.9", kind="essay", reference=lambda: 1)
    with pytest.raises(ValueError, match="exactly one of answer and matches / "):
        exercises.Mistake("en", "ja")


def test_a_mistake_is_named_only_when_the_answer_agrees_with_it_everywhere(monkeypatch):
    """A function mistake is named when the answer agrees with it on every input, not on the failing one alone;
    a predicate is asked about the failing input; a number's mistake within its tolerance; a choice's exactly."""
    monkeypatch.setattr(_core, "_REGISTRY", dict(_core._REGISTRY))
    doubled = exercises.Mistake("doubled", "2 倍", answer=lambda x: 4 * x)
    exercises.register(
        Exercise(id="99.8", kind="function", reference=lambda x: 2 * x, edge_cases=({"x": jnp.ones(2)},),
                 inputs=lambda rng: {"x": jnp.asarray(rng.normal(size=3))},
                 mistakes=(doubled, exercises.Mistake("negative", "負", matches=lambda i, e, g: bool(np.all(g < 0))))),
        Exercise(id="99.9", kind="number", reference=lambda: 10.0, rtol=0.01,
                 mistakes=(exercises.Mistake("a tenth", "10 分の 1", answer=1.0, rtol=0.1),)),
        Exercise(id="99.10", kind="choice", reference=lambda: "b", choices=("a", "b"),
                 mistakes=(exercises.Mistake("not a", "a ではない", answer="a"),)),
    )
    assert exercises.result("99.8", lambda x: 4 * x, lang="en").message.endswith("\n✗ 99.8: a common mistake:\n  doubled")
    assert exercises.result("99.8", lambda x: 4 * x, lang="ja").message.endswith("\n✗ 99.8：よくある間違いです。\n  2 倍")
    # agrees with the mistake on the failing (first) input only: not named
    first_only = lambda x: 4 * x if x.shape == (2,) else x
    assert "doubled" not in exercises.result("99.8", first_only, lang="en").message
    assert exercises.result("99.8", lambda x: -x, lang="en").message.endswith("✗ 99.8: a common mistake:\n  negative")
    assert exercises.result("99.9", 1.05, lang="en").message.endswith("\n✗ 99.9: a common mistake:\n  a tenth")
    assert "a tenth" not in exercises.result("99.9", 2.0, lang="en").message
    assert exercises.result("99.10", "A", lang="ja").message.endswith("\n✗ 99.10：よくある間違いです。\n  a ではない")


def test_check_prints_the_message(scratch, capsys):
    exercises.check("99.2", 751, lang="en")
    assert capsys.readouterr().out == "✓ 99.2: correct.\n"


def test_a_zero_one_array_is_not_a_mask(monkeypatch):
    monkeypatch.setattr(_core, "_REGISTRY", dict(_core._REGISTRY))
    exercises.register(Exercise(id="99.4", kind="function", reference=lambda T: jnp.ones((T, T), dtype=bool),
                                edge_cases=({"T": 2},)))
    message = exercises.result("99.4", lambda T: jnp.ones((T, T), dtype=jnp.int32), lang="en").message
    assert "(expected dtype bool,\n  got dtype int32)" in message


def test_an_unedited_starter_is_told_to_answer(scratch):
    assert exercises.result("99.2", ..., lang="en").message == "✗ 99.2: no answer yet.\n  Replace the ... with yours."
    assert "まだ答えがありません" in exercises.result("99.1", ..., lang="ja").message


def test_lists_count_as_tuples_or_arrays_and_nan_is_not_a_number(monkeypatch):
    monkeypatch.setattr(_core, "_REGISTRY", dict(_core._REGISTRY))
    exercises.register(
        Exercise(id="99.5", kind="function", reference=lambda n: (jnp.ones(n), jnp.eye(n)), edge_cases=({"n": 2},)),
        Exercise(id="99.6", kind="function", reference=lambda n: jnp.eye(n), edge_cases=({"n": 2},)),
        Exercise(id="99.7", kind="number", reference=lambda: 0.5),
    )
    assert exercises.result("99.5", lambda n: [jnp.ones(n), jnp.eye(n)]).passed
    assert not exercises.result("99.5", lambda n: [jnp.eye(n), jnp.ones(n)]).passed
    assert exercises.result("99.6", lambda n: [[1.0, 0.0], [0.0, 1.0]]).passed
    assert "must be a number;\n  got nan" in exercises.result("99.7", float("nan"), lang="en").message


def test_an_appendix_letter_is_its_place_among_the_appendices():
    """Quarto letters the appendices A, B, ... in the order _quarto-en.yml lists them; an appendix's exercise ids
    carry that letter, and its notebook is the one registered here."""
    from tools.book import chapter_files, load_yaml

    for lang in ("en", "ja"):
        book = load_yaml(ROOT / f"_quarto-{lang}.yml")["book"]
        appendices = [Path(f).name for f in chapter_files({"appendices": book["appendices"]})]
        for letter, name in APPENDICES.items():
            assert appendices.index(name) == ord(letter) - ord("A"), (lang, letter, appendices)
    assert set(APPENDICES) == set(_core.APPENDICES)
