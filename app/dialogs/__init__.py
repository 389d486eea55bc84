"""The File menu's dialogs: open a checkpoint, open a local model, get a model from the Hub."""
