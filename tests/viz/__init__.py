"""Tests of polyc.viz: HTML views and matplotlib pictures."""
