"""The Train tab: start, pause and watch a run; the live head grid and the step scrubber."""
