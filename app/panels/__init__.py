"""The setup panels (docks): data, model config and training settings."""
