"""The History tab: a model's checkpoints in step order, scrubbed, plotted and compared."""
