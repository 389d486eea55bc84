"""The app's Qt-free core: signals without Qt for the tabs' state objects, and the pace line every
progress readout uses. Nothing here imports Qt (an import-linter contract)."""
