"""Exercises with checked answers, one module per chapter (ch. 1-8).

In a notebook::

    from attnbook import exercises
    exercises.check("3.1", my_causal_mask)

prints either a confirmation or the first failing case, in the page's language. The machinery is
in :mod:`attnbook.exercises._core`; each ``chapterN`` module registers its chapter's exercises and
their reference answers.
"""

from attnbook.exercises._core import Exercise, Result, check, exercise_ids, get, register, result

# Importing a chapter's module registers its exercises.
from attnbook.exercises import (  # noqa: E402,F401  (imported for their registrations)
    chapter1,
    chapter2,
    chapter3,
    chapter4,
    chapter5,
    chapter6,
    chapter7,
    chapter8,
)

__all__ = ["Exercise", "Result", "check", "exercise_ids", "get", "register", "result"]
