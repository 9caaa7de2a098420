"""Exercises with checked answers, one module per chapter (``chapterN``) and one for appendix B (``bugs``).

In a notebook::

    from attnbook import exercises
    exercises.check("3.1", my_causal_mask)

prints either a confirmation or the first failing case, in the page's language (``lang="en"`` or
``lang="ja"`` chooses one), and names the mistake when the answer matches a common one. The machinery is
in :mod:`attnbook.exercises._core`; each ``chapterN`` module registers its chapter's exercises and
their reference answers, and is imported the first time one of its exercises is asked for.
"""

from attnbook.exercises._core import Exercise, Mistake, Result, check, exercise_ids, get, register, result

__all__ = ["Exercise", "Mistake", "Result", "check", "exercise_ids", "get", "register", "result"]
