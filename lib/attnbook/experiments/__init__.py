"""The book's measured experiments and their stored results (chapters 4-12).

A measured chapter's heavy runs are too slow for its notebook; they are run once by a command (``bench/*.py``)
and their results are stored as package data in ``attnbook/experiments/results/``, so that a notebook opened
alone (downloaded, or in Colab) reads them from the installed package, never from a path of the repository:

    from attnbook.experiments import RESULTS      # importlib.resources' folder of the stored results
    rows = experiments.read_csv("attention_cost.csv")

:mod:`attnbook.experiments.store` holds the reading and the writing (``read_csv``, ``read_json``, ``write_csv``,
``RunInfo``: the date, machine, versions and load every run stores beside its numbers).

Chapters 4, 5, 6 and 7's experiments are :mod:`attnbook.experiments.ch04`, :mod:`~attnbook.experiments.ch05`,
:mod:`~attnbook.experiments.ch06` and :mod:`~attnbook.experiments.ch07`: their
settings (frozen dataclasses), their runs and the writing of their stored results, each its own command
(``python -m attnbook.experiments.ch04 --write``, which stores every run of chapter 4, whose two sinusoidal
encodings' runs the chapter reads; ``python -m attnbook.experiments.ch05 cost --write``,
``python -m attnbook.experiments.ch06 --write``, ``python -m attnbook.experiments.ch07 ablations --write``); so are
chapters 9 and 11's, :mod:`~attnbook.experiments.ch09` and :mod:`~attnbook.experiments.ch11`
(``python -m attnbook.experiments.ch09 --write rope_scaling``, ``python -m attnbook.experiments.ch11``).
"""

from .store import RESULTS, RunInfo, machine, read_csv, read_json, source_folder, write_csv

__all__ = ["RESULTS", "RunInfo", "machine", "read_csv", "read_json", "source_folder", "write_csv"]
