"""The tokenizer a llama.cpp GGUF file describes in its metadata, as our :class:`~model.text.bpe.HFTokenizer`.

A GGUF file has no ``tokenizer.json``: llama.cpp stores the tokenizer as metadata. The keys read here:

==================================  ========================================================================
key                                 meaning
==================================  ========================================================================
``tokenizer.ggml.model``            the algorithm: ``gpt2`` (byte-level BPE), ``llama`` (SentencePiece-style
                                    BPE with byte fallback), ``gemma4``; others (``t5``, ``bert``...) refused
``tokenizer.ggml.tokens``           the vocabulary: entry ``i`` is the piece of id ``i``
``tokenizer.ggml.token_type``       one per token: 1 normal, 2 unknown, 3 control (``<|im_start|>``: a
                                    special token), 4 user-defined (``<think>``: matched whole, not special),
                                    5 unused, 6 byte (``<0x0A>``)
``tokenizer.ggml.scores``           one float per token: SentencePiece's log-probability, which ranks merges
                                    when the file lists none
``tokenizer.ggml.merges``           BPE merges by priority, each ``"left right"`` (``"Ġ t"``)
``tokenizer.ggml.pre``              which split regex a byte-level vocabulary was trained with
                                    (``llama-bpe``, ``qwen2``, ``gpt-4o``, ...)
``tokenizer.ggml.bos_token_id``     ids of the begin / end of sequence, unknown and padding tokens; each names
... ``eos_``, ``unknown_``,         a special token
``padding_token_id``
``tokenizer.ggml.add_bos_token``    whether ``encode`` starts every text with BOS (default: yes for ``llama``,
                                    no otherwise); ``add_eos_token`` likewise ends it with EOS (default no)
``tokenizer.ggml.add_space_prefix`` SentencePiece's dummy ``▁`` before a text (see below)
``general.architecture``            the model family: picks Gemma's and Phi-3's variants of ``llama``
==================================  ========================================================================

What is built equals what ``transformers`` builds from the same file (its GGUF tokenizer loader and the
``GPT2Tokenizer`` / ``LlamaTokenizer`` / ``GemmaTokenizer`` classes it hands the vocabulary to), piece for
piece, so a text gets the same ids:

* ``gpt2`` -- byte-level BPE. Every byte ``b`` is the character ``u(b)`` of GPT-2's byte alphabet
  (:func:`model.text.bpe.bytes_to_unicode`); a token the file spells outside that alphabet
  (``<｜begin▁of▁sentence｜>``) is re-spelled as ``u(b₁)u(b₂)…`` over its UTF-8 bytes. Merges are the
  file's. Pre-tokenizer: GPT-2's (``ByteLevel``, its own regex, no prefix space), or, for a ``pre`` that
  names another regex ``R`` (Llama 3's, Qwen 2's, GPT-4o's, Tekken's...), ``Split(R, isolated)`` then
  ``ByteLevel`` without a regex. Decoder: ``ByteLevel``.
* ``llama`` -- SentencePiece-style BPE with byte fallback: a space is ``▁``, a character without a token
  of its own is its UTF-8 bytes ``<0xNN>``. Merges are the file's, or, when it lists none, rebuilt from
  the vocabulary: every split ``t = l + r`` of a token ``t`` with ``l`` and ``r`` in the vocabulary is
  a merge ``(l, r)`` of rank ``(score(t), len(l), len(r))``, best first (equal ranks keep the order of
  the vocabulary, and within one ``t`` that of ``(id(l), id(r))``). Pre-tokenizer ``Metaspace(▁, prepend
  first)``: spaces become ``▁`` and a ``▁`` is put before the text unless it starts with one (``"hello"``
  -> ``▁hello``, ``" hello"`` -> ``▁hello`` too; not after a special token: ``"<s>hi"`` -> ``<s> h i``).
  Decoder: ``▁`` -> space, ``<0xNN>`` -> bytes, then the first leading space is dropped.
  ``general.architecture`` ``phi3``: the normalizer puts a ``▁`` before the text (and after each
  special token) and there is no pre-tokenizer (``" hello"`` -> ``▁▁hello``).
* ``llama`` with ``general.architecture`` ``gemma``/``gemma2``/``gemma3``, and ``gemma4`` -- Gemma's
  SentencePiece: the normalizer turns every space into ``▁`` (no dummy prefix), so the pre-tokenizer's
  split at spaces finds none and a text is merged whole; the decoder is Llama's without the strip.
  For ``gemma``..``gemma3`` a whitespace token containing a space (``"  "``) is re-spelled ``▁`` × its
  length, and rebuilt merges are ranked by position in the file (earlier first), not by score;
  ``gemma4`` re-spells nothing, ranks by score and never adds BOS.

Special tokens (matched whole in a text, one id each): the control tokens (for ``gpt2``, those spelled
in the byte alphabet), the tokens the ids above name, and the class defaults ``transformers`` adds when
the vocabulary has them (``<|endoftext|>``; ``<unk>``, ``<s>``, ``</s>``; Gemma's ``<bos>``, ``<eos>``,
``<pad>``, ``<mask>``). User-defined tokens are added, matched whole, but not special.

``encode(text) = prefix + ids(text) + suffix`` with ``prefix = [bos]`` when BOS is added (and the file
names one), ``suffix = [eos]`` likewise. A generation stops where llama.cpp's does: at EOS, at the
end-of-turn and end-of-message ids the file names, and at the tokens it knows by their text (Gemma's
``<end_of_turn>``, Phi-3's ``<|end|>``, ``<|im_end|>``...: :data:`_STOP_TEXTS`).

Where this departs from ``transformers``: it never appends a token the file does not have (for a default
such as ``<|endoftext|>`` missing from the vocabulary, or a named BOS spelled outside the byte alphabet,
``transformers`` adds a new id past the model's embedding; here BOS is the file's id); a vocabulary that
spells two ids the same is refused, where ``transformers`` silently loses the first. ``add_space_prefix``
is checked but not applied: ``transformers`` never applies it (the ``▁`` goes first whatever it says),
and the ids are to be the same.

Every check (the keys' types, the lengths, the ids' ranges, each merge's pieces) runs before anything
large is built, and a problem is one :class:`~model.text.tokens.TokenizerError` line naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
from tokenizers import Tokenizer as _Backend

from model.errors import first_line
from model.text.bpe import HFTokenizer, byte_level_bpe, bytes_to_unicode
from model.text.chat import chat_template_for
from model.text.gguf_meta import flag, numbers, shown, strings, token_id
from model.text.gguf_splits import PRE_TOKENIZER_SPLITS
from model.text.hf_backend import Backend
from model.text.tokens import TokenizerError

__all__ = ["SUPPORTED_TYPES", "GGUFTokenizer", "tokenizer_from_gguf"]

#: ``tokenizer.ggml.model`` values this module builds.
SUPPORTED_TYPES = ("gpt2", "llama", "gemma4")

_CONTROL, _USER_DEFINED = 3, 4
_SPACE = "\u2581"

#: Tokens besides EOS that end a generation in llama.cpp: (GGUF key suffix, what it is called).
_STOP_IDS = (("eot_token_id", "end-of-turn"), ("eom_token_id", "end-of-message"))
#: Tokens llama.cpp also ends a generation at by their text, whatever the ids above say (its vocabulary
#: loader's end-of-generation list): Gemma's ``<end_of_turn>`` and Phi-3's ``<|end|>`` among them, which
#: their files do not name as EOS. Left out: ``<|endoftext|>``, the document separator byte-level
#: vocabularies carry (SmolLM2's), at which transformers does not stop unless it is the EOS.
_STOP_TEXTS = frozenset(
    (
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
        "<end_of_turn>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "<|end_of_text|>",
        "<end_of_utterance>",
    )
)

#: The named special tokens: (GGUF key suffix, what it is called in messages).
_NAMED_IDS = (
    ("bos_token_id", "BOS"),
    ("eos_token_id", "EOS"),
    ("unknown_token_id", "unknown"),
    ("padding_token_id", "padding"),
)

#: Special tokens the ``transformers`` class for each variant adds by default (when in the vocabulary).
_CLASS_DEFAULTS = {
    "gpt2": ("<|endoftext|>",),
    "llama": ("<unk>", "<s>", "</s>"),
    "gemma": ("<unk>", "<bos>", "<eos>", "<pad>", "<mask>"),
}

_GEMMA_ARCHITECTURES = ("gemma", "gemma2", "gemma3")
_BYTE_ALPHABET = bytes_to_unicode()
_ALPHABET = frozenset(_BYTE_ALPHABET.values())


class GGUFTokenizer(HFTokenizer):
    """An :class:`HFTokenizer` built from a GGUF file's metadata; only its description says so.

    Saved and reloaded, it is a plain :class:`HFTokenizer` (same ``to_dict``, so equal to this one).
    """

    @property
    def description(self) -> str:
        return f"{super().description}, from a GGUF file"


def tokenizer_from_gguf(
    meta: Mapping[str, Any], name: str | None = None, file: str | None = None
) -> HFTokenizer:
    """The tokenizer that a GGUF file's metadata ``meta`` (key -> plain value) describes (``file``,
    the file's name, is how its chat template's errors name it).

    Raises :class:`TokenizerError` naming the key for an unsupported ``tokenizer.ggml.model``, a
    missing or malformed vocabulary, lists whose lengths do not match it, a merge of unknown pieces,
    a special-token id out of range, a flag that is not a boolean.
    """
    kind, variant = _variant(meta)
    found = _read_vocabulary(meta, kind)
    keys, respelled = _spellings(found.tokens, variant, kind)
    vocab = {key: i for i, key in enumerate(keys)}
    if len(vocab) < len(found.tokens):
        _refuse_duplicate(found.tokens, keys, respelled)
    merges = _merges(found, vocab, keys, variant, kind)
    backend = _assemble(variant, vocab, merges, found.pre)
    _add_special_tokens(backend, variant, found.tokens, keys, found.types, found.named)
    return _tokenizer(backend, meta, found, name, file)


def _variant(meta: Mapping[str, Any]) -> tuple[str, str]:
    """``(kind, variant)``: the file's ``tokenizer.ggml.model`` and which of ``transformers``' classes
    builds it (``gpt2``, ``gemma``, ``phi3``, ``llama``; ``general.architecture`` picks among the last)."""
    kind = meta.get("tokenizer.ggml.model")
    if kind is None:
        raise TokenizerError("the GGUF file describes no tokenizer: tokenizer.ggml.model is missing")
    if not isinstance(kind, str):
        raise TokenizerError(f"tokenizer.ggml.model must be a name, not {shown(kind)}")
    if kind not in SUPPORTED_TYPES:
        raise TokenizerError(
            f"GGUF tokenizer type {kind!r} (tokenizer.ggml.model) is not supported: only "
            "'gpt2' (byte-level BPE), 'llama' (SentencePiece BPE) and 'gemma4' are"
        )
    architecture = meta.get("general.architecture", "")
    if not isinstance(architecture, str):
        raise TokenizerError(f"general.architecture must be a name, not {shown(architecture)}")
    if kind == "gpt2":
        return kind, "gpt2"
    if kind == "gemma4" or architecture in _GEMMA_ARCHITECTURES:
        return kind, "gemma"
    return kind, "phi3" if architecture == "phi3" else "llama"


class _Vocabulary(NamedTuple):
    """The tokenizer's keys of a GGUF file, each checked (module docstring's table)."""

    tokens: list[str]
    types: list[Any] | None
    scores: list[Any] | None
    merge_lines: list[str] | None
    pre: str | None
    named: dict[str, int | None]
    add_bos: bool
    add_eos: bool


def _read_vocabulary(meta: Mapping[str, Any], kind: str) -> _Vocabulary:
    """Every key the tokenizer is built from, checked in turn (the first problem raised)."""
    tokens = strings(meta, "tokenizer.ggml.tokens")
    if tokens is None:
        raise TokenizerError("the GGUF tokenizer has no vocabulary: tokenizer.ggml.tokens is missing")
    if not tokens:
        raise TokenizerError("the GGUF tokenizer's vocabulary (tokenizer.ggml.tokens) is empty")
    n = len(tokens)
    types = numbers(meta, "tokenizer.ggml.token_type", n, integer=True)
    scores = numbers(meta, "tokenizer.ggml.scores", n, integer=False)
    merge_lines = strings(meta, "tokenizer.ggml.merges")
    pre = meta.get("tokenizer.ggml.pre")
    if pre is not None and not isinstance(pre, str):
        raise TokenizerError(f"tokenizer.ggml.pre must be a name, not {shown(pre)}")
    named = {key: token_id(meta, key, label, n) for key, label in _NAMED_IDS}
    add_bos = flag(meta, "tokenizer.ggml.add_bos_token", default=kind == "llama")
    add_eos = flag(meta, "tokenizer.ggml.add_eos_token", default=False)
    flag(meta, "tokenizer.ggml.add_space_prefix", default=True)  # checked; ignored, as transformers does
    if kind == "gemma4":
        add_bos = False  # the chat template writes <bos> itself
    return _Vocabulary(tokens, types, scores, merge_lines, pre, named, add_bos, add_eos)


def _spellings(tokens: list[str], variant: str, kind: str) -> tuple[list[str], str]:
    """The vocabulary's spelling of each token (its key in the BPE model), and how it was re-spelled
    (for the message naming two tokens spelled alike)."""
    if variant == "gpt2":
        return [t if _ALPHABET.issuperset(t) else _respell(t) for t in tokens], "spelled in the byte alphabet"
    if variant == "gemma" and kind != "gemma4":
        keys = [_SPACE * len(t) if " " in t and not t.strip() else t for t in tokens]
        return keys, "with spaces spelled as \u2581"
    return tokens, ""


def _merges(
    found: _Vocabulary, vocab: dict[str, int], keys: list[str], variant: str, kind: str
) -> list[tuple[str, str]]:
    """The file's merges, or, for SentencePiece, rebuilt from the vocabulary (module docstring)."""
    if found.merge_lines is not None:
        return _parse_merges(found.merge_lines, vocab)
    if variant == "gpt2":
        raise TokenizerError(
            "the byte-level GGUF tokenizer lists no merges (tokenizer.ggml.merges is missing)"
        )
    if variant == "gemma" and kind != "gemma4":
        return generate_merges(vocab, {key: -float(i) for i, key in enumerate(keys)})
    if found.scores is None:
        raise TokenizerError(
            "the SentencePiece GGUF tokenizer has neither tokenizer.ggml.merges nor tokenizer.ggml.scores "
            "(which rank the merges rebuilt from the vocabulary)"
        )
    return generate_merges(vocab, dict(zip(keys, found.scores)))


def _tokenizer(
    backend: _Backend, meta: Mapping[str, Any], found: _Vocabulary, name: str | None, file: str | None
) -> HFTokenizer:
    """The :class:`GGUFTokenizer` over ``backend``: BOS / EOS added as the file says, the ids a
    generation stops at, and the file's chat template."""
    bos, eos = found.named["bos_token_id"], found.named["eos_token_id"]
    out = GGUFTokenizer(
        Backend(backend, "the GGUF file's tokenizer"),  # every later call guarded
        name=name,
        prefix_ids=[bos] if found.add_bos and bos is not None else [],
        suffix_ids=[eos] if found.add_eos and eos is not None else [],
    )
    # generation stops at EOS and at the end-of-turn / end-of-message tokens llama.cpp stops at
    n = len(found.tokens)
    ends = [eos, *(token_id(meta, key, label, n) for key, label in _STOP_IDS)]
    by_text = {t: i for i, t in enumerate(found.tokens) if t in _STOP_TEXTS}
    if "<|return|>" in by_text and "<|call|>" in by_text:  # gpt-oss's harmony format, as llama.cpp reads
        by_text.pop("<|end|>", None)  # it: <|end|> closes each channel's message, not the answer
    ends += by_text.values()
    out.stop_ids = frozenset(i for i in ends if i is not None)
    bos_text, eos_text = (out.token_strings([i])[0] if i is not None else None for i in (bos, eos))
    out.chat_template = chat_template_for(
        meta.get("tokenizer.chat_template"),
        out,
        bos_token=bos_text,
        eos_token=eos_text,
        source=f"{file or 'the GGUF file'} (tokenizer.chat_template)",
    )
    return out


# ---------------------------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------------------------
def _assemble(
    variant: str, vocab: dict[str, int], merges: list[tuple[str, str]], pre: str | None
) -> _Backend:
    """The BPE model with the normalizer, pre-tokenizer and decoder of ``variant``."""
    try:
        if variant == "gpt2":
            tok = _Backend(byte_level_bpe(vocab, merges))
            split = PRE_TOKENIZER_SPLITS.get(pre or "")
            if split is None:
                tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            else:
                tok.pre_tokenizer = pre_tokenizers.Sequence(
                    [
                        *(
                            pre_tokenizers.Split(Regex(one), behavior="isolated")
                            for one in ((split,) if isinstance(split, str) else split)
                        ),
                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
                    ]
                )
            tok.decoder = decoders.ByteLevel()
            return tok
        sentencepiece = [decoders.Replace(_SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
        if variant == "gemma":
            tok = _Backend(
                models.BPE(
                    vocab=vocab,
                    merges=merges,
                    fuse_unk=True,
                    unk_token="<unk>",
                    dropout=None,
                    byte_fallback=True,
                )
            )
            tok.normalizer = normalizers.Replace(" ", _SPACE)
            tok.pre_tokenizer = pre_tokenizers.Split(
                pattern=" ", behavior="merged_with_previous", invert=False
            )
            tok.decoder = decoders.Sequence(sentencepiece)
            return tok
        tok = _Backend(
            models.BPE(vocab=vocab, merges=merges, fuse_unk=True, byte_fallback=True, dropout=None)
        )
        if variant == "phi3":
            tok.normalizer = normalizers.Sequence(
                [normalizers.Prepend(prepend=_SPACE), normalizers.Replace(pattern=" ", content=_SPACE)]
            )
            tok.pre_tokenizer = None
        else:
            tok.normalizer = None
            tok.pre_tokenizer = pre_tokenizers.Metaspace(
                replacement=_SPACE, prepend_scheme="first", split=False
            )
        tok.decoder = decoders.Sequence([*sentencepiece, decoders.Strip(content=" ", left=1, right=0)])
        return tok
    except Exception as exc:  # the checks above should leave nothing for the library to reject
        raise TokenizerError(f"the GGUF tokenizer cannot be built: {first_line(exc)}") from None


def _add_special_tokens(
    tok: _Backend,
    variant: str,
    tokens: list[str],
    keys: list[str],
    types: list[Any] | None,
    named: dict[str, int | None],
) -> None:
    """Add the special and user-defined tokens, in the order (and by the rules) ``transformers`` does.

    Only tokens the vocabulary already has are added, so no id past the file's vocabulary appears.
    """
    in_vocab = set(keys)
    defaults = _CLASS_DEFAULTS["llama" if variant == "phi3" else variant]
    tok.add_tokens([AddedToken(t, special=True) for t in defaults if t in in_vocab])
    kinds = types or ()
    control = [
        t
        for t, kind in zip(tokens, kinds)
        if kind == _CONTROL and (variant != "gpt2" or _ALPHABET.issuperset(t))
    ]
    if control:
        tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in control])
    known = set(tok.get_vocab())  # the vocabulary and the tokens added so far
    user = [t for t, kind in zip(tokens, kinds) if kind == _USER_DEFINED and t in known]
    if user:
        tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in user])
    added = {t.content for t in tok.get_added_tokens_decoder().values()}
    # the tokens the ids name, as the file spells them, when the vocabulary has that spelling
    by_id = [tokens[i] for i in named.values() if i is not None]
    extra = [t for t in dict.fromkeys(by_id) if t not in added and t in in_vocab]
    if extra:
        tok.add_tokens([AddedToken(t, special=True) for t in extra])


def generate_merges(vocab: dict[str, int], scores: Mapping[str, float]) -> list[tuple[str, str]]:
    """BPE merges implied by a vocabulary: ``(l, r)`` for every token ``t = l + r`` with both in ``vocab``.

    Ranked best first by ``(scores[t], len(l), len(r))``, descending; ties keep the order of ``scores``
    and, within one token, of ``(vocab[l], vocab[r])`` -- ``transformers``' ``generate_merges``.
    """
    found: list[tuple[str, str, float]] = []
    for token, score in scores.items():
        local = [
            (token[:k], token[k:], score)
            for k in range(1, len(token))
            if token[:k] in vocab and token[k:] in vocab
        ]
        if len(local) > 1:
            local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        found.extend(local)
    found.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in found]


# ---------------------------------------------------------------------------------------------
# checking the vocabulary and its merges (the keys themselves: model.text.gguf_meta)
# ---------------------------------------------------------------------------------------------
def _respell(token: str) -> str:
    return "".join(_BYTE_ALPHABET[b] for b in token.encode("utf-8"))


def _refuse_duplicate(tokens: list[str], keys: list[str], respelled: str) -> None:
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        j = first.setdefault(key, i)
        if j != i:
            if tokens[i] == tokens[j]:
                raise TokenizerError(
                    f"tokenizer.ggml.tokens lists {tokens[i]!r} twice (ids {j} and {i}): "
                    "every token must be spelled differently"
                )
            raise TokenizerError(
                f"tokenizer.ggml.tokens {tokens[j]!r} (id {j}) and {tokens[i]!r} (id {i}) are the same "
                f"token {key!r} {respelled}"
            )


def _parse_merges(lines: list[str], vocab: dict[str, int]) -> list[tuple[str, str]]:
    """``"left right"`` lines -> pairs; both pieces and their concatenation must be in the vocabulary."""
    merges: list[tuple[str, str]] = []
    for i, line in enumerate(lines):
        parts = line.split(" ")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise TokenizerError(
                f"tokenizer.ggml.merges entry {i} is not two pieces split by one space: {line[:40]!r}"
            )
        left, right = parts
        if left not in vocab or right not in vocab or left + right not in vocab:
            missing = next(p for p in (left, right, left + right) if p not in vocab)
            raise TokenizerError(
                f"tokenizer.ggml.merges entry {i} ({line[:40]!r}) names {missing!r}, "
                "which is not in the vocabulary (tokenizer.ggml.tokens)"
            )
        merges.append((left, right))
    return merges
