"""Training: the trainer (trainer), what it is given and reports (settings), recipes per data source
(recipes), how its steps run on the device (engine), its checkpoint state and resuming (state), the
prober callback (probes), several trained together (multitrain), run control, data-parallel, the
curves' smoothing. Import each name from its module; this package exports nothing itself."""
