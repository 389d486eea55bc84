"""Comparisons of several models: the comparison file and its numbers."""
