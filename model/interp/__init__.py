"""Interpretation: a prompt run and recorded (traces), what the Attention tab and the labs show, and the
analyses behind them."""
