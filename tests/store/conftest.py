"""Fixtures for the store tests; the helpers themselves live in ``store_helpers`` (importable by name)."""

from store_helpers import clock, store  # noqa: F401  (re-exported as fixtures)
