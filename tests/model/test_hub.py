"""Downloads from the Hub go through huggingface_hub into its cache, against a fake Hub on 127.0.0.1."""

import huggingface_hub.file_download as fd
import pytest
from huggingface_hub import constants, try_to_load_from_cache

from model.io import hub
from model.io.hub import DownloadCancelled, HubError, fetch, needed_files, parse_ref, plan
from model.io.pretrained import open_model

REPO = "tiny/gpt2"


def test_parse_ref_and_file_choice():
    assert parse_ref("hf:openai-community/gpt2@v1") == hub.HubRef("openai-community/gpt2", "v1")
    assert parse_ref("gpt2").rev == "main" and parse_ref("hf:gpt2").spec == "hf:gpt2"
    for bad in ("hf:", "a/b/c", "hf:a/b@", "x y"):
        with pytest.raises(HubError, match="not a Hub model name"):
            parse_ref(bad)
    assert parse_ref("x@refs/pr/1") == hub.HubRef("x", "refs/pr/1")
    names = [
        "config.json",
        "model.safetensors",
        "pytorch_model.bin",
        "vocab.json",
        "merges.txt",
        "README.md",
        "onnx/model.onnx",
        "tokenizer.json",
        "flax_model.msgpack",
    ]
    want = ["config.json", "tokenizer.json", "vocab.json", "merges.txt", "model.safetensors"]
    assert needed_files(names) == want
    sharded = [
        "config.json",
        "model.safetensors.index.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "pytorch_model-00001-of-00002.bin",
    ]
    assert needed_files(sharded)[1:] == sharded[1:4]
    with pytest.raises(HubError, match="only as PyTorch pickles"):
        needed_files(["config.json", "pytorch_model.bin"])


#: What a person passes through while typing a repo id, and other names the Hub refuses.
PARTIAL_OR_BAD_IDS = (
    "openai-",
    "EleutherAI/pythia-",
    "EleutherAI/",
    "a/",
    "/b",
    "a//b",
    "-x",
    "x--y",
    "x..y",
    "a.",
    "a/b.",
    ".hidden",
    "x.git",
    "owner/name@",
    "owner/name@ma in",
    "owner/name@../x",
    "owner/name@main/",
    "a" * 97,
    "se\u00f1or/x y",
    "we!rd/name",
)


@pytest.mark.parametrize("text", PARTIAL_OR_BAD_IDS)
def test_parse_ref_refuses_what_huggingface_hub_would_refuse_in_one_line(text, tmp_path, monkeypatch):
    with pytest.raises(HubError, match="not a Hub model name") as info:
        parse_ref(text)
    assert "\n" not in str(info.value) and "HFValidation" not in str(info.value)
    with pytest.raises(HubError):
        hub.resolve_name(text)
    assert hub.ref_problem(text)
    # and every name it accepts is one huggingface_hub takes (no HFValidationError later)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    for good in ("gpt2", "openai-community/gpt2", "EleutherAI/pythia-70m@step1000", "a_b/c.d-e@refs/pr/1"):
        ref = parse_ref(good)
        assert not hub.ref_problem(good)
        try_to_load_from_cache(ref.repo_id, "config.json", cache_dir=str(tmp_path), revision=ref.rev)
        assert hub.cached_folder(ref) is None
    with pytest.raises(HubError, match=r"no config\.json"):
        needed_files(["model.safetensors"])


def test_fetch_reports_progress_and_opens_the_model(fake_hub, tiny_gpt2_repo_files):
    commit = fake_hub.add_repo(REPO, tiny_gpt2_repo_files)
    p = plan(REPO)
    assert p.commit == commit and p.family == "gpt2"
    assert {n for n, _ in p.files} == {"config.json", "vocab.json", "merges.txt", "model.safetensors"}
    events = []
    folder = fetch(REPO, on_progress=events.append)
    assert folder.name == commit and (folder / "model.safetensors").is_file()
    assert not (folder / "README.md").exists()  # only what the model needs
    assert events[-1].finished and events[-1].done == events[-1].total == p.total
    assert [e.done for e in events] == sorted(e.done for e in events)  # never goes back
    assert "of" in events[-1].line() and events[-1].n_files == 4
    ckpt = open_model(folder)
    assert ckpt.meta["kind"] == "hf-gpt2" and ckpt.model.config.core.n_layers == 2

    # a second fetch reads the cache: no file is downloaded again
    n_gets = len([r for r in fake_hub.requests if r[0] == "GET" and "/resolve/" in r[1]])
    assert fetch("hf:" + REPO) == folder
    assert len([r for r in fake_hub.requests if r[0] == "GET" and "/resolve/" in r[1]]) == n_gets


def test_cancel_leaves_no_half_file_and_keeps_finished_ones(fake_hub, tiny_gpt2_repo_files, monkeypatch):
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 1024)  # many chunks: a cancel lands mid-file
    fake_hub.add_repo(REPO, tiny_gpt2_repo_files)
    calls_in_weights = []

    def stop_inside_weights():  # asked after every chunk: stop 5 chunks into the weights
        if fake_hub.gets("model.safetensors"):
            calls_in_weights.append(1)
        return len(calls_in_weights) > 5

    with pytest.raises(DownloadCancelled, match="cancelled"):
        fetch(REPO, should_stop=stop_inside_weights)
    cache = hub.cache_dir()
    assert not list(cache.rglob("*.incomplete"))  # the partial transfer is gone ...
    folder = hub.cached_folder(REPO)
    assert folder is not None and (folder / "config.json").is_file()
    assert not (folder / "model.safetensors").exists()  # ... and never appears where a model is read
    assert hub.check_complete(folder) == ["model.safetensors"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError, match="only partly downloaded"):
        fetch(REPO)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    # run again: the finished files are not fetched twice
    before = len(fake_hub.gets("config.json"))
    open_model(fetch(REPO))
    assert len(fake_hub.gets("config.json")) == before and len(fake_hub.gets("model.safetensors")) == 2


def test_a_broken_transfer_resumes_where_it_stopped(fake_hub, tiny_gpt2_repo_files, monkeypatch):
    monkeypatch.setattr(fd.time, "sleep", lambda s: None)  # the library waits 1 s before retrying
    monkeypatch.setattr(fd.constants, "DOWNLOAD_CHUNK_SIZE", 1024)  # it resumes after the last whole chunk
    fake_hub.add_repo(REPO, tiny_gpt2_repo_files)
    size = len(tiny_gpt2_repo_files["model.safetensors"])
    fake_hub.cut_once["model.safetensors"] = size // 3
    events = []
    folder = fetch(REPO, on_progress=events.append)
    gets = fake_hub.gets("model.safetensors")
    assert len(gets) == 2 and gets[0][2] == "" and gets[1][2].startswith("bytes=")
    resumed_at = int(gets[1][2][len("bytes=") :].rstrip("-"))
    assert size // 3 - 1024 < resumed_at <= size // 3  # the second asked only for what was missing
    assert (folder / "model.safetensors").read_bytes() == tiny_gpt2_repo_files["model.safetensors"]
    assert events[-1].done == events[-1].total  # the resumed bytes are not counted twice


def test_offline_opens_the_cache_and_fetches_nothing(fake_hub, tiny_gpt2_repo_files, monkeypatch):
    fake_hub.add_repo(REPO, tiny_gpt2_repo_files)
    folder = fetch(REPO)
    n = len(fake_hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fetch(REPO) == folder and len(fake_hub.requests) == n
    with pytest.raises(HubError, match="not in the cache and HF_HUB_OFFLINE=1"):
        fetch("other/model")
    assert len(fake_hub.requests) == n
    # the Hub unreachable (server gone): the cached model still opens, an uncached one says why
    monkeypatch.delenv("HF_HUB_OFFLINE")
    fake_hub.close()
    assert fetch(REPO) == folder
    with pytest.raises(HubError, match="cannot reach the Hub"):
        fetch("other/model")


@pytest.mark.parametrize(
    ("status", "repo", "message"),
    [
        (404, "nobody/nothing", r"nobody/nothing was not found on the Hub \(404\)"),
        (500, REPO, r"the Hub answered 500 \(a server error\)"),
        (401, REPO, r"needs a login \(401\)|was not found on the Hub \(401\)"),
    ],
)
def test_http_errors_are_one_line(fake_hub, tiny_gpt2_repo_files, status, repo, message):
    fake_hub.add_repo(REPO, tiny_gpt2_repo_files)
    if repo == REPO:
        fake_hub.status[REPO] = status
    with pytest.raises(HubError, match=message) as info:
        fetch(repo)
    assert "\n" not in str(info.value)
    assert hub.cached_folder(repo) is None


def test_unknown_revision_and_pickles_only_repo(fake_hub, tiny_gpt2_repo_files):
    fake_hub.add_repo(REPO, tiny_gpt2_repo_files)
    with pytest.raises(HubError, match="has no revision 'v9'"):
        fetch(REPO + "@v9")
    files = {k: v for k, v in tiny_gpt2_repo_files.items() if k != "model.safetensors"}
    files["pytorch_model.bin"] = b"\x80\x02 not really a pickle"
    fake_hub.add_repo("old/pickles", files)
    with pytest.raises(HubError, match="only as PyTorch pickles"):
        fetch("old/pickles")
    assert fake_hub.gets("pytorch_model.bin") == [] and hub.cached_folder("old/pickles") is None
