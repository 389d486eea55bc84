"""A model's training history: its revisions in step order, each one's attention on a probe prompt."""
