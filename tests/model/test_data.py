"""Data sources: built-in corpora, synthetic tasks, user files, batches and their guarantees."""

import json
import re

import pytest
import torch
import torch.nn.functional as F

from model.text import corpora
from model.text.corpora import TextCorpus, list_builtins, load_text_file, min_tokens
from model.text.datasource import IGNORE_INDEX, DataError, masked_targets
from model.text.sources import (
    DEFAULT_SOURCE,
    FALLBACK_SOURCE,
    data_for_model,
    prompt_for,
    resolve_source,
    source_help,
)
from model.text.tales import generate_tales
from model.text.tasks import list_tasks, make_task
from model.text.tokens import ByteTokenizer, CharTokenizer

ALL_SOURCES = list_builtins() + list_tasks()


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_the_lists_name_every_kind_the_issue_asks_for():
    assert DEFAULT_SOURCE == "builtin:stdlib" and list_builtins()[0] == DEFAULT_SOURCE
    wanted = {"task:induction", "task:copy", "task:reverse", "task:sort", "task:prev_token"}
    assert wanted <= set(list_tasks())
    assert set(source_help()) == set(ALL_SOURCES)


@pytest.mark.parametrize("spec", ALL_SOURCES)
def test_every_source_gives_shifted_batches_and_a_usable_identity(spec):
    src = resolve_source(spec)
    x, y, mask = src.get_masked_batch("train", 3, 40, gen())
    assert x.shape == y.shape == mask.shape == (3, 40)
    assert x.dtype == y.dtype == torch.int64 and mask.dtype == torch.bool
    assert int(x.min()) >= 0 and int(max(x.max(), y.max())) < src.vocab_size
    if src.next_token:
        assert torch.equal(x[:, 1:], y[:, :-1])
    else:  # previous-token task
        assert torch.equal(y[:, 1:], x[:, :-1]) and not mask[:, 0].any()
    assert mask.any()
    src.tokenizer.encode(src.default_prompt)  # the probe prompt is typeable in the source's vocabulary
    assert src.describe() and "\n" not in src.describe()
    ident = json.loads(json.dumps(src.identity()))
    assert {"name", "size", "sha256"} <= set(ident) and ident["name"] == src.name == spec
    assert resolve_source(ident["name"]).identity() == ident


@pytest.mark.parametrize("spec", ["builtin:primer", *list_tasks()])
def test_batches_are_deterministic_for_a_seed(spec):
    src = resolve_source(spec)
    a = [src.get_masked_batch("val", 4, 33, gen(5)) for _ in range(2)]
    assert all(torch.equal(p, q) for p, q in zip(a[0], a[1]))
    g = gen(5)
    first, second = src.get_batch("train", 4, 33, g), src.get_batch("train", 4, 33, g)
    assert not torch.equal(first[0], second[0])
    assert not torch.equal(src.get_batch("train", 4, 33, gen(6))[0], first[0])


def test_get_batch_draws_the_same_as_get_masked_batch():
    src = resolve_source("task:sort")
    x, y = src.get_batch("train", 2, 20, gen(1))
    x2, y2, _ = src.get_masked_batch("train", 2, 20, gen(1))
    assert torch.equal(x, x2) and torch.equal(y, y2)


# ---------------------------------------------------------------------------------------------------
# Text corpora


def test_validation_is_the_end_of_the_text_and_windows_never_cross():
    corpus = TextCorpus("a" * 900 + "b" * 100, val_fraction=0.1)
    a, b = corpus.tokenizer.encode("ab")
    assert len(corpus.train_tokens) == 900 and len(corpus.val_tokens) == 100
    x, y = corpus.get_batch("train", 64, 60, gen())
    assert (x == a).all() and (y == a).all()
    x, y = corpus.get_batch("val", 64, 99, gen())
    assert (x == b).all() and (y == b).all()
    assert corpus.max_seq_len("val") == 99
    with pytest.raises(DataError, match=r"seq_len=100 .* validation text has 100 tokens.*seq_len <= 99"):
        corpus.get_batch("val", 1, 100, gen())


def test_windows_are_slices_of_the_text():
    text = "".join(chr(65 + (i * 7919) % 50) for i in range(3000))
    corpus = TextCorpus(text, tokenizer=ByteTokenizer())
    x, y = corpus.get_batch("train", 8, 50, gen(3))
    train_text = text[: len(corpus.train_tokens)]
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        window = bytes(row_x + row_y[-1:]).decode()
        assert window in train_text


def test_bad_batch_arguments_are_rejected():
    corpus = resolve_source("builtin:primer")
    with pytest.raises(DataError, match="split='test'"):
        corpus.get_batch("test", 2, 8, gen())
    with pytest.raises(DataError, match="seq_len=0"):
        corpus.get_batch("train", 2, 0, gen())
    with pytest.raises(DataError, match=r"torch\.Generator"):
        corpus.get_batch("train", 2, 8, 0)


def test_masked_targets_make_cross_entropy_score_only_the_mask():
    task = resolve_source("task:copy")
    _, y, mask = task.get_masked_batch("train", 2, 30, gen())
    logits = torch.randn(2, 30, task.vocab_size, generator=gen(1))
    t = masked_targets(y, mask)
    assert (t[~mask] == IGNORE_INDEX).all() and torch.equal(t[mask], y[mask])
    loss = F.cross_entropy(logits.flatten(0, 1), t.flatten())
    assert torch.isclose(loss, F.cross_entropy(logits[mask], y[mask]))


def test_stdlib_is_python_source_in_a_fixed_order():
    corpus = resolve_source("builtin:stdlib")
    ident = corpus.identity()
    assert "fallback" not in ident, "this Python has its standard-library source"
    assert 1_000_000 <= ident["chars"] <= corpora.STDLIB_CAP_CHARS
    assert corpus.vocab_size < 100  # plain ASCII source only
    text = corpus.tokenizer.decode(corpus.tokens[:2000])
    assert text.startswith("# ---- ") and "import " in text


def test_source_files_order_and_exclusions(tmp_path):
    for rel, body in {
        "zeta.py": "z = 1\n",
        "alpha.py": "a = 1\r\n",
        "pkg/__init__.py": "p = 1\n",
        "pkg/test/test_x.py": "t = 1\n",
        "beta.py": "s = 'caf\u00e9'\n",
        "notes.txt": "not python\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(body.encode())
    files = corpora._source_files(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in files] == [
        "alpha.py",
        "beta.py",
        "zeta.py",
        "pkg/__init__.py",
    ]
    text, used = corpora._concat_sources(tmp_path, files, cap=10_000)
    assert used == 3 and "caf" not in text and "\r" not in text  # non-ASCII file skipped, CRLF normalised
    assert text.index("alpha.py") < text.index("zeta.py") < text.index("pkg/__init__.py")


def test_stdlib_falls_back_to_the_projects_own_text(monkeypatch, tmp_path):
    monkeypatch.setattr(corpora, "stdlib_dir", lambda: tmp_path / "no-such-dir")
    corpus = resolve_source("builtin:stdlib")
    assert corpus.name == "builtin:stdlib" and corpus.identity()["fallback"] == "project"
    assert "not found" in corpus.describe()
    corpus.tokenizer.encode(corpus.default_prompt)
    corpus.get_batch("val", 2, 64, gen())


def test_tales_are_deterministic_and_keep_their_cast():
    a, b = generate_tales(5_000, seed=1), generate_tales(5_000, seed=1)
    assert a == b and len(a) >= 5_000 and a != generate_tales(5_000, seed=2)
    first = a.split("\n\n")[0]
    name = re.search(r"named (\w+)|called (\w+)|name was (\w+)", first)
    hero = next(g for g in name.groups() if g)
    assert first.count(hero) >= 3  # the hero is named again and again: induction fodder
    assert "{" not in a and "}" not in a


def test_a_corpus_can_use_a_given_tokenizer():
    corpus = resolve_source("builtin:primer", tokenizer=ByteTokenizer())
    assert corpus.vocab_size == 256 and corpus.identity()["tokenizer"] == "byte"
    with pytest.raises(DataError, match=r"builtin:primer: .*not in the tokenizer's vocabulary.*'T'"):
        resolve_source("builtin:primer", tokenizer=CharTokenizer.from_text("abcdefghijklmnopqrstuvwxyz "))


# ---------------------------------------------------------------------------------------------------
# User text files


def test_good_file_loads_with_bom_and_crlf_removed(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_bytes(b"\xef\xbb\xbf" + "caf\u00e9 au lait\r\n".encode() * 40)
    corpus = load_text_file(p)
    assert corpus.name == str(p)
    assert "\r" not in corpus.tokenizer.chars and "\ufeff" not in corpus.tokenizer.chars
    assert "\u00e9" in corpus.tokenizer.chars
    assert resolve_source(str(p)).identity() == corpus.identity()


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"nope\.txt: no such file"):
        resolve_source(str(tmp_path / "nope.txt"))


def test_directory(tmp_path):
    with pytest.raises(DataError, match="is a directory"):
        load_text_file(tmp_path)


@pytest.mark.parametrize(
    "content, message", [(b"", "is empty$"), (b" \n\n\t ", r"is empty \(only whitespace\)")]
)
def test_empty_file(tmp_path, content, message):
    p = tmp_path / "e.txt"
    p.write_bytes(content)
    with pytest.raises(DataError, match=message):
        load_text_file(p)


def test_non_utf8_file_says_where(tmp_path):
    p = tmp_path / "latin1.txt"
    p.write_bytes("first line\nna\u00efve text\n".encode("latin-1") * 30)
    with pytest.raises(DataError) as e:
        load_text_file(p)
    msg = str(e.value)
    assert "not UTF-8" in msg and "0xef" in msg and "line 2, column 3" in msg and "byte offset 13" in msg


@pytest.mark.parametrize(
    "content, why",
    [
        (b"PK\x03\x04\x00\x00" + bytes(range(256)) * 4, "NUL bytes"),
        (bytes(range(1, 9)) * 200, "non-printable"),
        (bytes([1, 2, 3, 0xFF]) * 300, "non-printable"),
    ],
)
def test_binary_file(tmp_path, content, why):
    p = tmp_path / "blob.bin"
    p.write_bytes(content)
    with pytest.raises(DataError, match=f"looks binary .*{why}"):
        load_text_file(p)


def test_too_short_file_names_the_minimum(tmp_path):
    need = min_tokens(TextCorpus.MIN_SEQ_LEN, 0.1)
    p = tmp_path / "short.txt"
    p.write_text("x" * (need - 1))
    with pytest.raises(DataError, match=rf"too short: {need - 1} characters, but at least {need} are needed"):
        load_text_file(p)
    p.write_text("x" * need)  # the stated minimum really is enough for both splits
    corpus = load_text_file(p)
    corpus.get_batch("val", 1, TextCorpus.MIN_SEQ_LEN, gen())
    corpus.get_batch("train", 1, TextCorpus.MIN_SEQ_LEN, gen())


def test_too_large_file(tmp_path, monkeypatch):
    monkeypatch.setattr(corpora, "MAX_FILE_BYTES", 1000)
    p = tmp_path / "big.txt"
    p.write_text("word " * 400)
    with pytest.raises(DataError, match="too large"):
        load_text_file(p)


# ---------------------------------------------------------------------------------------------------
# Names and synthetic tasks


@pytest.mark.parametrize(
    "spec, words",
    [
        ("builtin:shakespeare", ["'shakespeare'", "builtin:stdlib", "builtin:tales"]),
        ("task:addition", ["'addition'", "task:induction", "task:sort"]),
        ("task:copy:length=3", ["'length'", "min_len (default 3)", "max_len"]),
        ("task:copy:max_len=x", ["max_len='x'", "integers"]),
        ("task:copy:max_len", ["key=value"]),
        ("task:induction:min_len=9,max_len=4", ["min_len=9", "max_len=4"]),
        ("task:sort:n_symbols=1", ["n_symbols=1", "between 2 and"]),
        ("", ["builtin:stdlib", "task:copy", "text file"]),
    ],
)
def test_bad_names_list_the_valid_ones(spec, words):
    with pytest.raises(DataError) as e:
        resolve_source(spec)
    for w in words:
        assert w in str(e.value)


def test_task_parameters_are_part_of_the_name():
    task = resolve_source("task:copy:max_len=12, n_symbols=6")
    assert task.spec.max_len == 12 and task.spec.n_symbols == 6 and task.vocab_size == 8
    assert task.name == "task:copy:n_symbols=6,max_len=12"
    assert make_task(task.name).identity() == task.identity()
    assert task.identity()["sha256"] != resolve_source("task:copy").identity()["sha256"]


def test_task_rejects_a_foreign_tokenizer():
    task = resolve_source("task:copy")
    assert resolve_source("task:copy", tokenizer=task.tokenizer) is not None
    with pytest.raises(DataError, match="own vocabulary"):
        resolve_source("task:copy", tokenizer=ByteTokenizer())


def episodes(task, n_rows=6, seq_len=200, seed=0):
    """Complete ``input=output`` episodes of a batch, decoded, with the targets the mask scores."""
    x, y, mask = task.get_masked_batch("train", n_rows, seq_len, gen(seed))
    out = []
    for r in range(n_rows):
        seq = task.tokenizer.decode([x[r, 0].item(), *y[r].tolist()])
        scored = [False, *mask[r].tolist()]
        start = 0
        for m in re.finditer(r"([^=\n]*)=([^=\n]*)\n", seq):
            assert m.start() == start, "episodes are packed back to back from the first token"
            start = m.end()
            out.append((m.group(1), m.group(2), scored[m.start() : m.end()]))
    return out


@pytest.mark.parametrize(
    "name, rule",
    [("copy", lambda s: s), ("reverse", lambda s: s[::-1]), ("sort", lambda s: "".join(sorted(s)))],
)
def test_sequence_tasks_follow_their_rule(name, rule):
    task = resolve_source(f"task:{name}")
    found = episodes(task)
    assert len(found) > 30
    lengths = set()
    for inp, outp, scored in found:
        assert outp == rule(inp)
        lengths.add(len(inp))
        n = len(inp)
        assert scored == [False] * (n + 1) + [True] * (n + 1)  # the output and its newline
    assert lengths <= set(range(task.spec.min_len, task.spec.max_len + 1)) and len(lengths) > 1
    prompt_in, prompt_out = task.default_prompt.rstrip("\n").split("=")
    assert prompt_out == rule(prompt_in) and len(prompt_in) == task.spec.max_len


@pytest.mark.parametrize(
    "params", ["", ":n_symbols=4,min_len=3,max_len=5,min_gap=2,max_gap=2", ":min_len=2,max_len=2,max_gap=0"]
)
def test_induction_scores_only_what_an_earlier_copy_predicts(params):
    task = resolve_source("task:induction" + params)
    s = task.spec
    x, y, mask = task.get_masked_batch("train", 8, 300, gen(2))
    runs = 0
    for r in range(8):
        seq = [x[r, 0].item(), *y[r].tolist()]
        scored = [False, *mask[r].tolist()]
        t = 1
        while t < len(seq):
            if not scored[t]:
                t += 1
                continue
            a = t
            while t < len(seq) and scored[t]:
                t += 1
            rep = seq[a - 1 : t]  # the repeat, from its unscored first token
            offsets = [a - 1 - i for i in range(a - 1) if seq[i : i + len(rep)] == rep]
            assert any(s.min_len + s.min_gap <= d <= s.max_len + s.max_gap for d in offsets)
            runs += 1
    assert runs >= 8
    prompt = task.default_prompt
    k = max(s.min_len, min(12, s.max_len))
    assert prompt[:k] == prompt[-k:] and len(prompt) == 2 * k + s.min_gap


def test_default_induction_prompt_repeats_distinct_symbols():
    prompt = resolve_source("task:induction").default_prompt
    half = prompt[: len(prompt) // 2]
    assert prompt == half * 2 and len(set(half)) == len(half) >= 8


def test_short_windows_never_give_a_batch_without_a_scored_target():
    # copy episodes are longer than 8 tokens; some windows of 8 hold no output symbol at all
    source = resolve_source("task:copy")
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        _, _, mask = source.get_masked_batch("train", 1, 8, g)
        assert mask.any()


def test_a_window_too_short_for_any_target_is_a_clear_error():
    source = resolve_source("task:copy:min_len=8,max_len=8")
    with pytest.raises(DataError, match="no target to score"):
        source.get_masked_batch("train", 2, 2, torch.Generator().manual_seed(0))


def test_a_one_symbol_induction_repeat_is_refused():
    with pytest.raises(DataError, match="a repeat needs at least 2 symbols"):
        resolve_source("task:induction:min_len=1,max_len=1")


def test_data_for_a_loaded_model_keeps_reencodes_or_says_why():
    corpus = resolve_source("builtin:primer")
    task = resolve_source("task:copy")
    # the current data already uses the model's tokenizer: keep it as it is
    assert data_for_model(corpus.tokenizer, corpus, "builtin:primer") == (corpus, "builtin:primer", "")
    # another tokenizer that covers the text: the same corpus, encoded with the model's tokenizer
    wide = ByteTokenizer()
    source, spec, note = data_for_model(wide, corpus, "builtin:primer")
    assert source.tokenizer == wide and spec == "builtin:primer" and note == ""
    # a task has its own symbols: the fallback text when the tokenizer reads it, and a note on both
    source, spec, note = data_for_model(corpus.tokenizer, task, "task:copy")
    assert spec == FALLBACK_SOURCE and source.tokenizer == corpus.tokenizer
    assert "task:copy" in note and "tokenizer" in note and FALLBACK_SOURCE in note
    # ... else no data, and a note that names what could not be kept
    source, spec, note = data_for_model(CharTokenizer("ab"), task, "task:copy")
    assert source is None and spec == "" and "task:copy" in note and "choose other data" in note
    assert data_for_model(wide) == (None, "", "")  # no current data: nothing to say


def test_prompt_for_picks_the_first_text_the_tokenizer_encodes():
    tok = CharTokenizer("abc ")
    assert prompt_for(tok, "€uro", "", "cab") == "cab"
    assert prompt_for(tok, "xyz") == "abcabcabc"  # the fallbacks after the candidates
    tiny = CharTokenizer("qz")  # nothing fits: the text of its own first tokens
    assert prompt_for(tiny, "abc") == tiny.decode(list(range(min(16, tiny.vocab_size))))


def test_a_folder_is_its_text_files_in_path_order_and_a_folder_without_text_is_one_line(tmp_path):
    from model.text.sources import check_source, resolve_source

    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "two.txt").write_text("the second file\n" * 20, encoding="utf-8")
    (tmp_path / "a.txt").write_text("the first file\n" * 20, encoding="utf-8")
    (tmp_path / "c.bin").write_bytes(b"\x00\x01\x02" * 100)  # binary: left out
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.txt").write_text("hidden\n", encoding="utf-8")
    check_source(str(tmp_path))
    corpus = resolve_source(str(tmp_path))
    text = corpus.tokenizer.decode(corpus.tokens.tolist())
    assert text == "the first file\n" * 19 + "the first file\n\n" + "the second file\n" * 20
    assert "2 text files" in corpus.describe()
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blob").write_bytes(b"\x00" * 64)
    with pytest.raises(DataError, match="holds no UTF-8 text file"):
        check_source(str(empty))
