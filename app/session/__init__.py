"""The session layer: what every tab shares (the model slot, the training run, the followed run, the
probe), the background workers, and the settings between launches. It knows no tab, panel or window."""
