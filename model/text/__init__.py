"""Text: tokenizers (characters, bytes, BPE via `tokenizers`, the registry), corpora and synthetic tasks."""
