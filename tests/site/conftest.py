"""The website's tests: both editions built with tools/build_site.sh and read in Chromium (links, numbering, search,
widgets, phone widths, citations, offline assets). Without Quarto or a browser they skip, except under CI=true,
where a missing tool fails them: `python -m pytest tests/site`.

The site is built once per test run. Two files need it, test_site.py (the site as files, the chooser, search,
the widgets) and test_site_views.py (every page in the browser at two widths, axe-core), so that pytest-xdist
(``--dist loadfile``) runs them on two workers side by side after the one build (the root conftest.py queues both
first). Under xdist the first worker to ask builds, holding a lock, and records the build beside the workers'
temporary folders (pytest-xdist's documented way for a session fixture to run once); the other waits for the lock
and reads the record. Without xdist the session builds it itself.
"""

from __future__ import annotations

import fcntl
import functools
import http.server
import threading
from collections.abc import Callable, Iterator

import pytest

from site_session import Built, build_site, chromium_paths, missing, quarto_command
from tools.screenshots import CHROMIUM_ARGS, QuietHandler


@pytest.fixture(scope="session")
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The site, built once per test run from the current sources."""
    quarto = quarto_command()
    if quarto is None:
        missing("Quarto", "run 'bash tools/setup.sh', or install Quarto 1.7.34 "
                "(conda install -c conda-forge quarto, pip install quarto-cli, https://quarto.org)")
    worker = getattr(request.config, "workerinput", {}).get("workerid")  # pytest-xdist's; None without it
    if worker is None:  # this process is the whole run
        built = build_site(quarto)
        print(f"\nsite built in {built.seconds:.0f} s (both editions)")
    else:
        shared = tmp_path_factory.getbasetemp().parent  # one folder per run, shared by its workers
        record = shared / "site-build.json"
        with open(shared / "site-build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if record.is_file():
                built = Built.from_json(record.read_text(encoding="utf-8"))
            else:
                built = build_site(quarto)
                record.write_text(built.to_json(), encoding="utf-8")
                print(f"\nsite built in {built.seconds:.0f} s (both editions) by {worker}")
    if built.error:
        pytest.fail(built.error)
    return built


@pytest.fixture(scope="session")
def browser() -> Iterator[Callable[[str], object]]:
    """Headless Chromium with a given preferred language: one per language, closed at the end."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = chromium_paths()
    started: dict[str, object] = {}

    def start(language: str = "en-US"):
        if language in started:
            return started[language]
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        # tools.screenshots.CHROMIUM_ARGS: no host but the loopback resolves, so the tests never
        # depend on the network (the site serves its own MathJax). "eager": a page counts as loaded
        # when its DOM is ready.
        options.page_load_strategy = "eager"
        for arg in (*CHROMIUM_ARGS, "--window-size=1280,900", f"--lang={language}"):
            options.add_argument(arg)
        options.add_experimental_option("prefs", {"intl.accept_languages": language})
        started[language] = webdriver.Chrome(service=Service(driver_path), options=options)
        return started[language]

    yield start
    for driver in started.values():
        driver.quit()


@pytest.fixture(scope="session")
def server(site: Built) -> Iterator[str]:
    """The site over HTTP on the loopback interface, as GitHub Pages would serve it."""
    handler = functools.partial(QuietHandler, directory=str(site.path))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
