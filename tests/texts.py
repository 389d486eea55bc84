"""Texts the tests share, and the ones the reference process of the real-model suite
(tests/smollm2_reference.py) runs through ``transformers``: one definition for both sides."""

from __future__ import annotations

#: Text that needs every path of a tokenizer: spaces, newlines, tabs, emoji, CJK, digits.
TRICKY_TEXTS = [
    "  two leading spaces,   three inside and trailing  ",
    "line one\nline two\n\n\ttabbed 12345 3.14159",
    "emoji 😀 👍🏽 family 👨‍👩‍👧 and 日本語のテキスト 東京",
    "Русский, Ελληνικά, مرحبا, café naïve — 2024-01-01",
]

#: The real GGUF file's tokenizer against transformers': every path of a byte-level BPE.
GGUF_TRICKY = [
    "The quick brown fox jumps over the lazy dog. It's what we'll do, isn't it?",
    "def f(x):\n\tif x:\n\t\treturn [i ** 2 for i in range(x)]\n    pass  # four spaces\n",
    "12345 3.14159 -0.5e10 1,000,000",
    "emoji 😀👍🏽 family 👨‍👩‍👧 and combining e\u0301 a\u0308 n\u0303",
    "日本語のテキスト、東京。中文，한국어",
    "\n\n\n",
    "   leading and trailing spaces   ",
    "two  spaces   three    four\r\n",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>between<|endoftext|>",
    "",
    " ",
    "Long text, over and over: " + " ".join(f"word{i} 😀 ünïcödé\t{i * 7}" for i in range(120)),
]

PROSE = (
    "The transformer reads a sentence all at once. Each attention head looks back over the words "
    "before it and decides, for every position, which earlier words matter most."
)
CODE = (
    "def softmax(x):\n\te = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
)
ODD = "emoji 😀 👍🏽 family 👨‍👩‍👧 日本語のテキスト, Ελληνικά, مرحبا, café naïve — 2024-01-01\u200b\u00a0end"
CHAT = [{"role": "user", "content": "What does an attention head do?"}]
#: A question a chat model answers in one sentence, then ends its turn
SHORT_CHAT = [{"role": "user", "content": "What is the capital of France?"}]
IOI_CLEAN = "When Mary and John went to the store, John gave a drink to"
IOI_CORRUPT = "When Mary and John went to the store, Mary gave a drink to"


def long_text() -> str:
    """1000+ tokens of varied English (not one sentence repeated: each paragraph names new numbers)."""
    parts = [
        f"Paragraph {i}: the model at step {i * 137} had a loss of {3.0 - i / 40:.3f}; its head {i % 9} in "
        f"layer {i % 30} moved its attention from the token {i + 1} places back to the first one."
        for i in range(22)
    ]
    return " ".join(parts)
