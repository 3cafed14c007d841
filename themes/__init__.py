"""Themes: one business domain each — documents, settings and index (in progress)."""
