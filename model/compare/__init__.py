"""Comparisons of several models: what each run is (variants), what the Compare tab tabulates
(tables), and the comparison file with each run's attention (comparison)."""
