"""llama.cpp's GGUF files: the format, the tensors' decoding, each family's names and conventions."""
