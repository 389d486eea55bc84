"""Training: the trainer, several trained together, run control, data-parallel, the curves' smoothing."""
