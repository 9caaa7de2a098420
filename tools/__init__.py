"""Authoring tools of the book: structure checks, code sync between languages, notebook execution.

Run them from the repository root as modules, e.g. ``python -m tools.bookcheck``.
"""
