"""Sphinx configuration of the pytest-cnnperf manual: MyST Markdown pages, the Furo theme, and
the references generated from the code (``_ext/cnnperf_reference.py``).

Build it from the repository root, as CI does (warnings are errors; nothing is fetched)::

    sphinx-build -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))  # the package of this checkout, installed or not

from pytest_cnnperf import __version__  # noqa: E402

project = "pytest-cnnperf"
author = "pytest-cnnperf developers"
copyright = "2026, pytest-cnnperf developers"
version = release = __version__

extensions = ["myst_parser", "sphinx_copybutton", "cnnperf_reference"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]

# `[text](page.md#a-heading)` links to headings up to level 3; a link that names no heading fails
myst_heading_anchors = 3
myst_enable_extensions = ["deflist"]
# no intersphinx, no remote images: the build reads nothing from the network
nitpicky = True
highlight_language = "text"

html_theme = "furo"
html_title = f"pytest-cnnperf {release}"
html_static_path = ["_static"]
html_css_files = ["cnnperf.css"]
html_theme_options = {"navigation_with_keys": True}
html_show_sourcelink = False
copybutton_prompt_text = r"\$ "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = False
