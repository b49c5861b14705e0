"""Training data for the Table 3 baselines (the synthetic SFT examples of the demo are in thinkj.synthetic.sft_examples).

* SFT w/o CoT: the ``direct_v2`` prompt and the verdict sentence only (no thinking) -> ``sft_direct.yaml``.
* SFT w/ CoT (rejection sampling): a model samples ``n`` judge traces per comparison; only traces with the
  right verdict and a well-formed answer are kept as SFT targets -> ``judge_sft.yaml`` with that dataset.
* BT classifier: the comparison's own chosen / rejected responses under the original conversation ->
  ``bt_rm.yaml`` (LlamaFactory stage ``rm``).

    thinkj train baseline-data --pairs train.jsonl --out runs/x/baselines              # direct + BT
    thinkj train baseline-data --pairs train.jsonl --out runs/x/baselines --rs-model runs/x/base -n 8
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from thinkj.inference.base import InferenceBackend, Messages, SamplingParams
from thinkj.inference.failures import CallTally, FailedCall
from thinkj.prompts import get_template, verdict_sentence
from thinkj.records import PreferencePair
from thinkj.verdict_parser import parse_verdict

DIRECT_TEMPLATE = "direct_v2"


def _decided(pairs: Iterable[PreferencePair]) -> list[PreferencePair]:
    return [p for p in pairs if p.decided]


def direct_sft_examples(pairs: Iterable[PreferencePair], template: str = DIRECT_TEMPLATE) -> list[tuple[Messages, str]]:
    """SFT w/o CoT: (direct prompt, ``Therefore, Response (x) is better.``); ties skipped."""
    tmpl = get_template(template)
    return [(tmpl.render(p), verdict_sentence(p.label)) for p in _decided(pairs)]


def bt_examples(pairs: Iterable[PreferencePair]) -> list[tuple[Messages, str, str]]:
    """BT classifier: (conversation, preferred response, other response); ties skipped."""
    out = []
    for p in _decided(pairs):
        chosen, rejected = (p.response_a, p.response_b) if p.label == "a" else (p.response_b, p.response_a)
        out.append((list(p.messages), chosen, rejected))
    return out


def rejection_sampling_examples(pairs: list[PreferencePair], backend: InferenceBackend, *, n: int = 8,
                                params: SamplingParams | None = None, template: str = "judge_strength_v2",
                                per_item: int = 1, calls: CallTally | None = None
                                ) -> tuple[list[tuple[Messages, str]], dict[str, int]]:
    """SFT w/ CoT: keep up to ``per_item`` right, well-formed traces of ``n`` samples per comparison.

    A comparison with a call that failed after the backend's retries is skipped and counted (``failed_calls``),
    never searched for right traces among the answered samples; ``calls`` (when given) counts every call."""
    if params is None:  # the main base model's profile budget, as for evaluation and the difficulty filter
        from thinkj.models.profiles import generation_budget

        params = SamplingParams(temperature=1.0, max_new_tokens=generation_budget(), n=n)
    tmpl = get_template(template)
    decided = _decided(pairs)
    prompts = [tmpl.render(p) for p in decided]
    outputs = backend.generate(prompts, params) if prompts else []
    tally = calls if calls is not None else CallTally()
    tally.add(outputs)
    examples, counts = [], Counter(comparisons=len(decided), ties_skipped=len(pairs) - len(decided))
    counts["failed_calls"] = sum(isinstance(t, FailedCall) for samples in outputs for t in samples)
    for pair, prompt, samples in zip(decided, prompts, outputs):
        if any(isinstance(t, FailedCall) for t in samples):
            counts["items with a failed call"] += 1
            continue
        kept = [t for t in samples
                if (v := parse_verdict(t, tmpl.answer, strict=True)).choice == pair.label and v.well_formed][:per_item]
        counts["samples"] += len(samples)
        counts["kept"] += len(kept)
        counts["items without a right sample"] += not kept
        examples.extend((prompt, t) for t in kept)
    return examples, dict(counts)
