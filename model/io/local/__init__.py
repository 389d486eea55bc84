"""The models already on this machine (Ollama, LM Studio, the Hugging Face cache), listed unread."""
