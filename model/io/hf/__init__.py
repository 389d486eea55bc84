"""Hugging Face model folders: config.json and weights, GPT-2's layout, today's families."""
