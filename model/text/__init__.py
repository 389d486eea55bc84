"""Text: tokenizers (characters, bytes, BPE via `tokenizers`, the registry) and where training tokens
come from: :mod:`~model.text.sources` (``resolve_source``, the one entry point) over corpora and synthetic
tasks, each a :class:`~model.text.datasource.DataSource`."""
