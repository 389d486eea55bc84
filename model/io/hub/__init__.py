"""Models from the Hugging Face Hub: ``hf:REPO[@REVISION]`` fetched into the standard cache, then opened.

Everything goes through ``huggingface_hub`` (its cache layout, ETags, redirects, retries, tokens); this
package only decides *which* files a model needs and turns the library's progress and errors into what
a person reads:

* :func:`parse_ref` (:mod:`~model.io.hub.refs`) — ``"hf:gpt2"``, ``"openai-community/gpt2@main"`` →
  :class:`HubRef`; a name ``huggingface_hub`` would refuse (``openai-``, ``a/``, ``x--y``) is a
  :class:`HubError` of one line (:func:`ref_problem` says why without raising: what the Get a model…
  field shows while typing).
* :func:`needed_files` (:mod:`~model.io.hub.download`, with :func:`plan` and :func:`fetch`) — of a
  repo's top-level files: ``config.json``, the tokenizer files, and the weights as safetensors
  (``model.safetensors``, or ``model.safetensors.index.json`` + its shards).
  A repo whose weights exist only as pickles (``pytorch_model.bin``, ``*.pt``) is refused before any
  byte is fetched: Attention Lab never unpickles a downloaded file.
* :func:`plan` — one metadata call (``model_info`` with file sizes): commit, files, bytes, family.
* :func:`fetch` — the planned files, one ``hf_hub_download`` each, into the cache; returns the
  snapshot folder that :func:`model.io.pretrained.open_model` reads. ``on_progress`` receives
  :class:`DownloadProgress` (bytes, total, speed); ``should_stop`` cancels between two chunks.
  ``huggingface_hub`` writes each file to a temporary name and renames it into the cache only when
  complete, so a cancelled or broken download never leaves a half-file where a model is read;
  files already complete are kept and not fetched again, and a transfer cut by the network resumes
  where it stopped (an HTTP ``Range`` request).
* :data:`CATALOGUE` (:mod:`~model.io.hub.catalogue`) — the models people study, by name;
  :func:`resolve` turns ``hf:REPO[@REV]`` (or a catalogue name) into the snapshot folder.
* With ``HF_HUB_OFFLINE=1`` (or when the Hub cannot be reached) :func:`fetch` opens what the cache
  holds and fetches nothing; a model only partly downloaded is named as such.

The endpoint and cache come from the environment at call time (``HF_ENDPOINT``, ``HF_HUB_CACHE`` /
``HF_HOME``), falling back to ``huggingface_hub``'s own settings, so a test can point them at a server
on 127.0.0.1 and a temporary folder (:mod:`~model.io.hub.library`: those settings, and the
library's errors in one line). ``huggingface_hub`` itself (about 0.3 s to import) is imported only
inside the functions that talk to the Hub.

This package is one namespace: callers import from ``model.io.hub``, whose names are listed here.
"""

from model.io.hub.catalogue import CATALOGUE, CatalogueEntry, resolve, resolve_name
from model.io.hub.download import (
    DownloadProgress,
    Plan,
    cached_folder,
    check_complete,
    fetch,
    needed_files,
    plan,
)
from model.io.hub.library import cache_dir, endpoint, explain, offline
from model.io.hub.refs import (
    PREFIX,
    DownloadCancelled,
    HubError,
    HubRef,
    HubUnreachable,
    is_hub_spec,
    parse_ref,
    ref_problem,
    repo_id_problem,
    revision_problem,
)

__all__ = [
    "CATALOGUE",
    "PREFIX",
    "CatalogueEntry",
    "DownloadCancelled",
    "DownloadProgress",
    "HubError",
    "HubRef",
    "HubUnreachable",
    "Plan",
    "cache_dir",
    "cached_folder",
    "check_complete",
    "endpoint",
    "explain",
    "fetch",
    "is_hub_spec",
    "needed_files",
    "offline",
    "parse_ref",
    "plan",
    "ref_problem",
    "repo_id_problem",
    "resolve",
    "resolve_name",
    "revision_problem",
]
