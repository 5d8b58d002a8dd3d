"""The dashboard in a real browser (Debian's headless Chromium, through Playwright): it loads
from disk with no console error and no request leaving the disk, and its charts are drawn."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import known
import pytest

from pytest_cnnperf.history import commands
from pytest_cnnperf.history.store import open_store

OpenPage = Callable[[Path], tuple[Any, list[str]]]

#: SVG charts with drawn paths in them
DRAWN = "() => [...document.querySelectorAll('svg')].filter(s => s.querySelector('path')).length"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("matplotlib")
    folder = tmp_path_factory.mktemp("dashboard")
    path = folder / "history.db"
    with open_store(path, create=True) as history:
        for run, results in known.history():
            history.append(run, results)
    commands.dashboard(folder / "site", str(path), None, None, 20)
    return folder / "site"


def test_the_index_loads_offline_and_its_charts_are_drawn(site: Path, open_page: OpenPage) -> None:
    page, problems = open_page(site / "index.html")
    assert problems == []
    assert page.title() == "cnnperf history"
    assert page.evaluate(DRAWN) == 3
    assert page.locator("table tr").count() == 4
    # the summary links to each benchmark's page, which draws its chart
    page.click("text=test_history.py::test_step")
    page.wait_for_load_state("load")
    assert page.url.endswith("/001-test_history.py-test_step.html")
    assert page.evaluate(DRAWN) == 1
    width = page.evaluate(
        "() => document.querySelector('.chart svg').getBoundingClientRect().width"
    )
    assert width > 600
    assert problems == []


@pytest.mark.slow
def test_every_page_loads_offline_and_draws(
    site: Path, open_page: OpenPage, tmp_path: Path
) -> None:
    pages = sorted(site.glob("0*.html"))
    assert len(pages) == 3
    for path in pages:
        page, problems = open_page(path)
        assert problems == [], path.name
        assert page.evaluate(DRAWN) == 1, path.name
        text = page.inner_text("body")
        assert "Runs, newest first" in text
        page.screenshot(path=tmp_path / f"{path.stem}.png", full_page=True)
        assert (tmp_path / f"{path.stem}.png").stat().st_size > 10_000


@pytest.mark.slow
def test_a_broken_page_is_caught(tmp_path: Path, open_page: OpenPage) -> None:
    """The checks above can fail: a console error, a script error and a request off the disk."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!doctype html><html><head><script src='https://cdn.example/x.js'></script></head><body>"
        "<script>console.error('explicit'); undefinedFunction();</script></body></html>"
    )
    _, problems = open_page(bad)
    assert any(p.startswith("external: https://cdn.example/x.js") for p in problems)
    assert "console: explicit" in problems
    assert any("undefinedFunction" in p for p in problems)
