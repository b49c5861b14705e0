"""File-level entry points: PreferencePair JSONL + model dirs in, LlamaFactory datasets + summaries out.

Generation goes through :class:`thinkj.inference.cache.CachedBackend` with one SQLite cache per output
directory, so an interrupted build resumes and a finished one reruns for free. The generation budget is the
model profile's ``max_new_tokens`` (``configs/models/<profile>.yaml``, as for evaluation and the difficulty
filter) unless ``max_new_tokens`` is given.

A call that failed after the backend's retries (a server backend) drops its comparison, is counted in the summary
(``calls``) and is not cached; past ``max_failure_rate`` (default 0: any failed call; every call failing always
counts) the dataset and summary are written and :class:`~thinkj.errors.StageIncomplete` is raised (exit 1), and
rerunning the same command asks only for the failed calls (:mod:`thinkj.inference.failures`).

    thinkj train critic-pairs --pairs runs/x/task/train.jsonl --judge runs/x/train/judge_sft \\
        --critic runs/x/sft/critic_sft --out runs/x/offline/iter_1/data --backend hf
    thinkj train sampling-pairs --pairs train.jsonl --judge runs/x/train/judge_sft --out runs/x/offline_sampling -n 8
    thinkj train baseline-data --pairs train.jsonl --out runs/x/baselines [--rs-model MODEL -n 8]
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from thinkj.inference import InferenceBackend, SamplingParams, make_backend
from thinkj.inference.cache import CachedBackend, ResultCache
from thinkj.inference.failures import CallTally, check_failure_rate
from thinkj.offline.critic_pairs import CRITIC_TEMPLATE, JUDGE_TEMPLATE, critic_guided_pairs, sampling_pairs
from thinkj.records import PreferencePair, load_pairs, write_json

Backend = str | Callable[..., InferenceBackend]  # a registered backend name, or a factory (model_path, **kw)

DPO_DATASET = "thinkj_dpo"
SAMPLING_DATASET = "thinkj_dpo_sampling"


def cached_backend(backend: Backend, model: str | Path, cache: ResultCache, tag: str, **kwargs: Any) -> CachedBackend:
    """``backend`` is a registered name (``hf``, ``vllm``, ...) or a factory ``backend(model_path, **kwargs)``."""
    inner = backend(str(model), **kwargs) if callable(backend) else make_backend(backend, str(model), **kwargs)
    return CachedBackend(inner, cache, tag=tag)


def _budget(max_new_tokens: int | None, profile: str | Path | None) -> int:
    """``max_new_tokens`` as given, else the profile's budget (default profile: the main base model's)."""
    from thinkj.models.profiles import generation_budget

    return generation_budget(profile) if max_new_tokens is None else max_new_tokens


def _load(pairs: str | Path | list[PreferencePair], limit: int | None) -> list[PreferencePair]:
    loaded = load_pairs(pairs) if isinstance(pairs, (str, Path)) else list(pairs)
    return loaded[:limit] if limit else loaded


def build_critic_pairs(pairs: str | Path | list[PreferencePair], judge_model: str | Path, critic_model: str | Path,
                       out_dir: str | Path, *, backend: Backend = "hf", dataset: str = DPO_DATASET, limit: int | None = None,
                       orders: tuple[str, ...] = ("original",), max_new_tokens: int | None = None,
                       profile: str | Path | None = None, critic_samples: int = 1, critic_temperature: float = 0.0, seed: int = 0,
                       backend_kwargs: dict[str, Any] | None = None, judge_template: str = JUDGE_TEMPLATE,
                       critic_template: str = CRITIC_TEMPLATE, max_failure_rate: float = 0.0) -> dict[str, Any]:
    """Judge + critic inference, pairing, and the LlamaFactory dataset in ``out_dir``; returns the summary."""
    out = Path(out_dir)
    check_failure_rate(max_failure_rate)
    max_new_tokens = _budget(max_new_tokens, profile)
    cache = ResultCache(out / "cache.sqlite")
    kwargs = backend_kwargs or {}
    judge = cached_backend(backend, judge_model, cache, judge_template, **kwargs)
    if str(critic_model) == str(judge_model):  # one model in both roles is loaded once
        critic = CachedBackend(judge.backend, cache, tag=critic_template)
    else:
        critic = cached_backend(backend, critic_model, cache, critic_template, **kwargs)
    result = critic_guided_pairs(
        _load(pairs, limit), judge, critic, orders=orders,
        judge_params=SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens, seed=seed),
        critic_params=SamplingParams(temperature=critic_temperature, max_new_tokens=max_new_tokens,
                                     n=critic_samples, seed=seed),
        judge_template=judge_template, critic_template=critic_template)
    summary = result.write(out, dataset)
    summary["cache"] = {"hits": judge.hits + critic.hits, "generated": judge.misses + critic.misses}
    write_json(out / "summary.json", summary)
    cache.close()
    _check_calls(result.calls, out, max_failure_rate, summary["pairs"])
    return summary


def _check_calls(calls: CallTally, out: Path, max_failure_rate: float, kept: int) -> None:
    calls.check(str(out), max_failure_rate, written=f"The {kept} pairs built from the calls that answered and "
                                                    "the summary are written.")


def build_sampling_pairs(pairs: str | Path | list[PreferencePair], judge_model: str | Path, out_dir: str | Path, *,
                         backend: Backend = "hf", n: int = 8, temperature: float = 1.0, dataset: str = SAMPLING_DATASET,
                         limit: int | None = None, orders: tuple[str, ...] = ("original",),
                         max_new_tokens: int | None = None, profile: str | Path | None = None, seed: int = 0,
                         backend_kwargs: dict[str, Any] | None = None, max_failure_rate: float = 0.0) -> dict[str, Any]:
    """The "offline (Sampling)" baseline's dataset: right vs wrong among ``n`` sampled judge traces."""
    out = Path(out_dir)
    check_failure_rate(max_failure_rate)
    max_new_tokens = _budget(max_new_tokens, profile)
    cache = ResultCache(out / "cache.sqlite")
    judge = cached_backend(backend, judge_model, cache, JUDGE_TEMPLATE, **(backend_kwargs or {}))
    result = sampling_pairs(_load(pairs, limit), judge, n=n, orders=orders,
                            params=SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens, n=n, seed=seed))
    summary = result.write(out, dataset)
    cache.close()
    _check_calls(result.calls, out, max_failure_rate, summary["pairs"])
    return summary


def build_baseline_data(pairs: str | Path | list[PreferencePair], out_dir: str | Path, *, rs_model: str | Path | None = None,
                        backend: Backend = "hf", n: int = 8, temperature: float = 1.0,
                        max_new_tokens: int | None = None, profile: str | Path | None = None,
                        limit: int | None = None, seed: int = 0,
                        backend_kwargs: dict[str, Any] | None = None, max_failure_rate: float = 0.0) -> dict[str, Any]:
    """Datasets ``thinkj_direct_sft`` and ``thinkj_bt`` (and ``thinkj_rs_sft`` when ``rs_model`` is given)."""
    from thinkj.export.llamafactory import write_preference_dataset, write_sft_dataset
    from thinkj.offline.baselines import bt_examples, direct_sft_examples, rejection_sampling_examples

    out = Path(out_dir)
    check_failure_rate(max_failure_rate)
    max_new_tokens = _budget(max_new_tokens, profile)  # a bad profile fails before any file is written
    loaded = _load(pairs, limit)
    summary: dict[str, Any] = {"dataset_dir": str(out),
                               "thinkj_direct_sft": write_sft_dataset(out, "thinkj_direct_sft", direct_sft_examples(loaded)),
                               "thinkj_bt": write_preference_dataset(out, "thinkj_bt", bt_examples(loaded))}
    calls = CallTally()
    if rs_model is not None:
        cache = ResultCache(out / "cache.sqlite")
        model = cached_backend(backend, rs_model, cache, JUDGE_TEMPLATE, **(backend_kwargs or {}))
        examples, counts = rejection_sampling_examples(
            loaded, model, n=n, params=SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens, n=n, seed=seed),
            calls=calls)
        summary["thinkj_rs_sft"] = write_sft_dataset(out, "thinkj_rs_sft", examples)
        summary["rejection_sampling"] = counts
        summary["calls"] = calls.summary()
        cache.close()
    write_json(out / "summary.json", summary)
    calls.check(str(out), max_failure_rate, written="The datasets built from the calls that answered and the "
                                                    "summary are written.")
    return summary
