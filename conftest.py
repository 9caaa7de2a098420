"""pytest set-up shared by tests/ and nbval's run over chapters/.

- JAX's compilation cache (tools/jax_cache.py).
- nbval runs every notebook with its training runs nudged one ulp (``$ATTNBOOK_NUDGE``, read by
  ``attnbook.train.nudged``): the English edition up, the Japanese edition down, and the Japanese edition's
  kernels on one core. The stored outputs were written without a nudge on two cores, so every compared output
  is checked against a run whose trajectories differ in their last bits, as they do on another CPU, and the
  Japanese one against two perturbations at once, as on a reader's one-core machine of another make
  (``tools.robustness``'s ``nudge-down+one-core``; README, "Outputs that hold on every machine"). Whoever sets
  ``$ATTNBOOK_NUDGE`` themselves (``tools.robustness`` does, empty for no nudge) keeps their choice, and no
  kernel is pinned then.
- The tests (not the notebooks) compile with XLA's backend optimisations off
  (``--xla_backend_optimization_level=0``) and with XLA:CPU's older loop emitters instead of its MLIR fusion
  emitters (``--xla_cpu_use_fusion_emitters=false``): they compile hundreds of small programs once each, and
  compile far faster that way (measured on 2 cores: four compile-bound test files 290 s -> 216 s with the
  first flag; test_mha_kv_heads and test_chunked 143 -> 107 s of CPU with the second added; one multi-head
  layer's program 1.6 -> 0.7 s). Only this
  process compiles that way: nbval's kernels and every other process a test starts get the caller's flags, so
  every notebook runs as a reader runs it. The library's results
  must not depend on the level (``tools.robustness`` checks the notebooks under it); ``ATTNBOOK_TEST_XLA=default``
  runs the tests with the caller's flags too, as the weekly workflow of the newest versions does.
- The site tests first, for pytest-xdist's workers (``-n auto --dist loadfile`` in pyproject.toml): the page views
  (tests/site/test_site_views.py) on one worker and the rest of the site's tests (tests/site/test_site.py) on the
  other, both after the one build of the site (tests/site/conftest.py).
- Failure reports without ANSI colour codes where pytest itself writes no colour (a CI log, a file, ``NO_COLOR``):
  nbval colours its reports unless ``--color=no``, and the kernel's tracebacks carry IPython's colours.
"""

import os
import re

import pytest

from tools import jax_cache

jax_cache.enable()

# XLA reads $XLA_FLAGS once, when JAX's backend starts in this process: start it now with the tests' flags, then
# give the environment back, so that what this process starts (nbval's kernels, tools.robustness, the
# notebook-execution tests) runs with the caller's flags, as a reader's notebook does.
_READER_XLA_FLAGS = os.environ.get("XLA_FLAGS")
if os.environ.get("ATTNBOOK_TEST_XLA") != "default":
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [_READER_XLA_FLAGS, "--xla_backend_optimization_level=0",
                                                     "--xla_cpu_use_fusion_emitters=false"]))
    import jax

    jax.devices()
    if _READER_XLA_FLAGS is None:
        del os.environ["XLA_FLAGS"]
    else:
        os.environ["XLA_FLAGS"] = _READER_XLA_FLAGS

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

NUDGE = "ATTNBOOK_NUDGE"
EDITION_NUDGE = {"en": "up", "ja": "down"}
ONE_CORE_EDITIONS = {"ja"}
# The cores this process may use, given back after a pinned notebook (a kernel inherits its parent's affinity
# when nbval starts it, and keeps it: pinning this process just before is taskset for that kernel alone).
_CORES = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
_CHOSEN = NUDGE in os.environ  # set by the caller: left alone


def nudge_for(path) -> str | None:
    """The nudge a notebook at ``path`` runs with under nbval, or None (not a chapter notebook)."""
    if path.suffix != ".ipynb" or path.parent.parent.name != "chapters":
        return None
    return EDITION_NUDGE.get(path.parent.name)


def pytest_collection_modifyitems(items):
    # Under pytest-xdist (--dist loadfile) each file runs whole on one worker (a chapter's two editions
    # together: pytest_xdist_make_scheduler), in this order: the site's two browser files (the site build, then
    # the browser) take longest, so they start first. A stable sort keeps every notebook's cells in order.
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in SITE_TESTS)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, with a chapter's two editions as one unit: the English notebook, then the Japanese.

    pytest-xdist queues its units by number of tests (--loadscope-reorder, its default), and the twins
    of a chapter have the same number of cells, so with one unit per file they ran side by side on the
    two workers and both compiled the chapter's programs. One after the other on one worker, the Japanese
    twin loads from JAX's compilation cache (tools/jax_cache.py) what the English one just compiled:
    every program without a host callback (JAX caches none with one; the library's own programs, training runs
    included, return their value checks instead, attnbook._checks.jit, so the twin loads them too).
    Measured before that change, CPU seconds of the Japanese notebook alone (cold) -> after its English twin, load 3.4-8.8:
    chapter 4 87 -> 55, chapter 5 97 -> 66, chapter 6 47 -> 19, chapter 7 73 -> 64, chapter 9 35 -> 33; both
    twins under `pytest -n auto` from an empty cache, load 2.7-5.0: chapter 5 173 -> 153, chapter 6 89 -> 60.
    """
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    # _split_scope and _assign_work_unit are pytest-xdist's private methods (3.8.0): requirements.lock pins
    # pytest-xdist==3.8.0 for them; check both when the lock moves it.
    class ChapterScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return EDITION_FOLDER.sub("chapters/", super()._split_scope(nodeid))

        def _assign_work_unit(self, node) -> None:
            # The site tests, the longest units, go first (pytest_collection_modifyitems' order), ahead of
            # the queue by number of tests, where ten larger units (now a chapter pair among them) came first:
            # the page views to the first worker, the rest of the site's tests to the second.
            for scope in reversed(SITE_TESTS):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return ChapterScheduling(config, log)


EDITION_FOLDER = re.compile(r"^chapters/(?:en|ja)/")
# The longest first: every page at two widths, then the site's files, chooser, search and widgets.
SITE_TESTS = ("tests/site/test_site_views.py", "tests/site/test_site.py")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # Before nbval's notebook setup, which starts the kernel with this process's environment.
    if _CHOSEN:
        return
    nudge = nudge_for(item.path)
    if nudge is None:
        os.environ.pop(NUDGE, None)
    else:
        os.environ[NUDGE] = nudge
    if _CORES is not None and len(_CORES) > 1:
        one_core = nudge is not None and item.path.parent.name in ONE_CORE_EDITIONS
        os.sched_setaffinity(0, {min(_CORES)} if one_core else _CORES)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if isinstance(report.longrepr, str) and not item.config.get_terminal_writer().hasmarkup:
        report.longrepr = ANSI.sub("", report.longrepr)
