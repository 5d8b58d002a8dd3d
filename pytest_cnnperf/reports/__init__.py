"""Renderings of results for their readers: terminal, Markdown, JSON, plots, JUnit."""
