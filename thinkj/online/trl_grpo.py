"""GRPO with the Think-J reward on one machine, through TRL's ``GRPOTrainer`` (CPU or a single GPU).

    # tiny model, CPU, a few steps (what the tests run; make demo's online stage is this with SmolLM2)
    thinkj train rl --engine trl --algo grpo --model runs/tiny/model --data runs/demo-tiny_seed0/task/train.jsonl \\
        --out runs/cpu/online_trl --steps 4 --num-generations 4 --max-completion-length 32
    # one GPU, a real judge, the paper's GRPO learning rate and KL coefficient (Table 11)
    thinkj train rl --engine trl --algo grpo --model runs/qwen7b/judge_sft --data data/verl/train.parquet \\
        --out runs/qwen7b/online_trl --steps 500 --num-generations 8 --max-completion-length 3072 --preset thinkj_qwen

The data is either a PreferencePair JSONL (the prompt is rendered with ``judge_strength_v2``, ties left
out and counted) or the verl parquet from ``thinkj.export.verl`` (its ``prompt`` column as is; the gold
label and strength from ``reward_model.ground_truth``). The reward is the same preset function verl
calls (``thinkj.rewards``); its accuracy and format terms are also passed to TRL as zero-weight reward
functions so TRL logs them per step (``rewards/acc/mean``, ``rewards/format/mean``) for the curves, and the
position diagnostics (``pos/a_share``, ``pos/acc_gold_a``, ``pos/acc_gold_b``; ``pos/flip_rate`` with twins) are
logged beside them.

Both orders in one step (``--twins step``: J1; ``--twins union``: J4R's one group of both orders; the consistency
term with ``--weight w_con=...``; ``thinkj.rewards.designs.twins`` has our reading)::

    thinkj train rl --engine trl --model runs/demo_seed0/train/judge_sft --data pairs.jsonl --out runs/x/online_twins \
        --twins union --weight w_con=1.0 --num-generations 4 --prompts-per-step 1 --steps 12
"""

from __future__ import annotations

import difflib
import inspect
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.fingerprint import fingerprint
from thinkj.folder_swap import promote, restore, staging_dir
from thinkj.locks import exclusive, output_lock
from thinkj.online.trl_batching import StepLayout, step_layout
from thinkj.records import RecordError, load_pairs, write_json, write_jsonl
from thinkj.rewards import get_preset
from thinkj.rewards.adapters.trl import TRLReward, completion_text, log_to_trainer
from thinkj.rewards.designs.twins import TWIN_MODES, consistency_terms, needs_twins, position_stats

DONE_MARKER = "thinkj_online_done.json"


def load_rl_rows(path: str | os.PathLike, template: str = "judge_strength_v2", *, twins: bool = False,
                 seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Rows ``{prompt: messages, label, strength}`` from a PreferencePair JSONL or a verl parquet, plus skip counts.

    With ``twins`` every comparison comes in both orders, side by side (rows 2k, 2k+1), each row with ``twin`` and
    ``order`` (``thinkj.rewards.designs.twins``): a JSONL's pairs are written so (pair order shuffled with ``seed``); a
    parquet must already be (``thinkj data verl-parquet --twins``)."""
    path = Path(path)
    if not path.exists():
        raise RecordError("RL data file not found", path=path)
    if path.suffix == ".parquet":
        return _rows_from_parquet(path, twins)
    from thinkj.export.verl import verl_rows

    rows, skipped = verl_rows(load_pairs(path), template, twins=twins, seed=seed)
    return [{"prompt": r["prompt"], **_gold(r["reward_model"], path, i + 1), **_twin(r, twins)}
            for i, r in enumerate(rows)], skipped


def _twin(row: dict[str, Any], twins: bool) -> dict[str, Any]:
    info = row.get("extra_info") or {}
    return {"twin": info["twin"], "order": info["order"]} if twins else {}


def _gold(reward_model: Any, path: Path, row: int) -> dict[str, Any]:
    gt = (reward_model or {}).get("ground_truth") if isinstance(reward_model, dict) else None
    if not isinstance(gt, dict) or gt.get("label") not in ("a", "b", "tie"):
        raise RecordError(f"expected {{'label': 'a'|'b'|'tie', 'strength'}} , got {gt!r:.80}", path=path, line=row,
                          field="reward_model.ground_truth")
    return {"label": gt["label"], "strength": gt.get("strength")}


def _rows_from_parquet(path: Path, twins: bool = False) -> tuple[list[dict[str, Any]], dict[str, int]]:
    from thinkj.export.verl import check_rl_row
    from thinkj.records import read_parquet_rows

    columns = ["prompt", "reward_model", *(["extra_info"] if twins else [])]
    rows, skipped = [], {"tie": 0}
    for i, rec in read_parquet_rows(path, columns):
        prompt, label, strength = check_rl_row(rec, path=path, line=i)
        if label == "tie":
            skipped["tie"] += 1
            continue
        row = {"prompt": prompt, "label": label, "strength": strength}
        if twins:
            info = rec.get("extra_info") or {}
            if not info.get("twin") or info.get("order") not in (0, 1):
                raise RecordError("no twin key and order: write the parquet with both orders "
                                  "(`thinkj data verl-parquet PAIRS OUT --twins`)", path=path, line=i,
                                  field="extra_info.twin")
            row.update(twin=info["twin"], order=info["order"])
        rows.append(row)
    if twins:
        check_twin_rows(rows, path)
    return rows, skipped


def check_twin_rows(rows: list[dict[str, Any]], path: str | os.PathLike) -> None:
    """Rows 2k and 2k+1 are orders 0 and 1 of one comparison (what the twin sampler relies on)."""
    if len(rows) % 2:
        raise RecordError(f"{len(rows)} rows: an odd count cannot hold both orders of every comparison", path=path)
    for i in range(0, len(rows), 2):
        first, second = rows[i], rows[i + 1]
        if first["twin"] != second["twin"] or (first["order"], second["order"]) != (0, 1):
            raise RecordError(f"rows {i + 1} and {i + 2} are not the two orders of one comparison", path=path,
                              line=i + 1, field="extra_info.twin")


class RewardComponent:
    """One term of a preset's output (e.g. ``acc``) as a TRL reward function, so TRL logs it per step."""

    def __init__(self, preset: str, key: str, **weights: Any):
        self.preset, self.key, self.weights = get_preset(preset), key, weights
        self.__name__ = key

    def __call__(self, prompts: list | None = None, completions: list | None = None, label: list | None = None,
                 strength: list | None = None, **kwargs: Any) -> list[float]:
        completions = completions or []
        strength = strength if strength is not None else [None] * len(completions)
        return [float(self.preset(completion_text(c), {"label": g, "strength": s}, **self.weights)[self.key])
                for c, g, s in zip(completions, label or [], strength)]


class RecordingReward(TRLReward):
    """The preset's total reward for TRL, keeping the last batch's samples for ``last_samples.jsonl`` and logging the
    position diagnostics (``pos/*``, ``thinkj.rewards.designs.twins.position_stats``) with the trainer's metrics each step.

    With ``twins`` the generation batch holds both orders of each comparison (``twin`` and ``order`` columns) and
    every rollout's score gains ``w_con`` x its consistency term (``thinkj.rewards.designs.twins.consistency_terms``)."""

    def __init__(self, preset: str = "thinkj_qwen", twins: bool = False, **weights: Any):
        self.pays_consistency = twins
        super().__init__(preset, **weights)
        self.twins = twins
        self.w_con = float(self.preset.weights(self.weights).get("w_con", 0.0))
        self.last_samples: list[dict[str, Any]] = []

    def __call__(self, prompts: list | None = None, completions: list | None = None, label: list | None = None,
                 strength: list | None = None, twin: list | None = None, order: list | None = None,
                 **kwargs: Any) -> list[float]:
        completions = completions or []
        if label is None or len(label) != len(completions):
            raise ValueError("RecordingReward needs a 'label' dataset column with one gold label per completion")
        strength = strength if strength is not None else [None] * len(completions)
        results = [self._score(completion_text(c), {"label": g, "strength": s})
                   for c, g, s in zip(completions, label, strength)]
        preds = [r.get("pred") for r in results]
        if self.twins:
            if twin is None or order is None:
                raise ValueError("RecordingReward(twins=True) needs the 'twin' and 'order' dataset columns")
            for result, term in zip(results, consistency_terms(preds, label, twin, order)):
                result.update(term)
                result["score"] = float(result["score"]) + self.w_con * term["consistency"]
        scores = [float(r["score"]) for r in results]
        n = max(len(results), 1)
        keys = [k for k in ("acc", "format", "strength", "gold_error", "consistency", "twin_missing")
                if results and k in results[0]]
        self.last_metrics = {k: sum(r[k] for r in results) / n for k in keys}
        self.last_metrics.update(position_stats(preds, label, twin if self.twins else None,
                                                order if self.twins else None))
        self._log_metrics()
        extra = [{"twin": t, "order": o, "consistency": r["consistency"]} for t, o, r in zip(twin, order, results)] \
            if self.twins else [{} for _ in results]
        self.last_samples = [{"completion": completion_text(c), "label": g, "strength": s, "pred": p, "score": x, **e}
                             for c, g, s, p, x, e in zip(completions, label, strength, preds, scores, extra)]
        return scores

    def _log_metrics(self) -> None:
        log_to_trainer(self._trainer, {k: v for k, v in self.last_metrics.items()
                                       if k.startswith("pos/") or k in ("consistency", "twin_missing", "gold_error")})


class TwinSampler:
    """TRL's train sampler for both orders in one step: comparisons (rows 2k, 2k+1) in a seeded random order, cut
    into generation batches of ``pairs_per_batch``; in each, every row ``per_order`` times -- order 0's rollouts,
    then order 1's -- and the whole batch ``repeat_count`` times (TRL's reuse of a generation across
    ``steps_per_generation`` x ``num_iterations``, as its RepeatSampler). TRL groups ``num_generations``
    consecutive rollouts: ``per_order`` gives one group per order, ``2 * per_order`` one group of both orders."""

    def __init__(self, n_rows: int, per_order: int, pairs_per_batch: int, repeat_count: int = 1,
                 shuffle: bool = True, seed: int = 0):
        import torch

        if n_rows % 2 or n_rows < 2 * pairs_per_batch:
            raise ThinkJError(f"twin sampler: {n_rows} rows cannot give generation batches of {pairs_per_batch} "
                              "comparisons in both orders")
        self.n_pairs, self.per_order, self.pairs_per_batch = n_rows // 2, per_order, pairs_per_batch
        self.repeat_count, self.shuffle = repeat_count, shuffle
        self.generator = torch.Generator()
        self.generator.manual_seed(seed)

    def __iter__(self):
        import torch

        order = (torch.randperm(self.n_pairs, generator=self.generator).tolist() if self.shuffle
                 else list(range(self.n_pairs)))
        usable = self.n_pairs - self.n_pairs % self.pairs_per_batch  # an incomplete last batch is dropped
        for start in range(0, usable, self.pairs_per_batch):
            chunk = order[start:start + self.pairs_per_batch]
            for _ in range(self.repeat_count):
                for pair in chunk:
                    for row in (2 * pair, 2 * pair + 1):
                        yield from [row] * self.per_order

    def __len__(self) -> int:
        usable = self.n_pairs - self.n_pairs % self.pairs_per_batch
        return usable * 2 * self.per_order * self.repeat_count


def _trainer_class(twins: str) -> Any:
    """TRL's GRPOTrainer, or with twins a subclass whose train sampler is :class:`TwinSampler`."""
    from trl import GRPOTrainer

    if twins == "off":
        return GRPOTrainer
    per_order_divisor = 2 if twins == "union" else 1

    class TwinGRPOTrainer(GRPOTrainer):
        def _get_train_sampler(self, dataset: Any = None) -> Any:
            dataset = self.train_dataset if dataset is None else dataset
            per_order = self.num_generations // per_order_divisor
            return TwinSampler(len(dataset), per_order, self.args.generation_batch_size // (2 * per_order),
                               self.num_iterations * self.args.steps_per_generation, self.shuffle_dataset,
                               self.args.seed)

    return TwinGRPOTrainer


@dataclass
class GRPORun:
    """One TRL GRPO run. Defaults are for the tiny CPU model; pass the paper's values on a GPU."""

    model: str
    data: str
    out_dir: str
    preset: str = "thinkj_qwen"
    weights: dict[str, float] = field(default_factory=dict)  # overrides of the preset's w_acc / w_fmt / w_str
    template: str = "judge_strength_v2"
    steps: int = 4
    learning_rate: float = 1e-6  # Table 11, GRPO actor lr
    beta: float = 0.001  # KL coefficient (Table 11: kl_loss_coef 0.001)
    num_generations: int = 4  # the paper's group is 8 (Table 11); 4 keeps CPU runs small
    prompts_per_step: int = 2
    max_prompt_length: int = 1024  # Table 11
    max_completion_length: int = 64  # Table 11 uses 3072; the tiny model only needs a short tail
    temperature: float = 1.0
    seed: int = 0
    device: str = "auto"  # auto | cpu | gpu
    save_steps: int = 50
    max_rows: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # further GRPOConfig fields, applied last
    # both orders of each comparison in one step (thinkj.rewards.designs.twins): off | step (per-order groups, J1) |
    # union (one group of both orders' rollouts, J4R). With twins, prompts_per_step counts comparisons.
    twins: str = "off"
    # held-out pairs judged greedily before step 1 and every eval_steps (thinkj.online.trl_eval): a PreferencePair
    # JSONL (written in both orders) or a parquet with both orders (`thinkj data verl-parquet --val-out`)
    eval_data: str | None = None
    eval_steps: int = 10
    # CPU speed (thinkj.online.trl_speed; experiments/LOG.md "RL step cost on CPU"), the algorithm unchanged: the
    # prompts' common prefix runs once per batch in generation and in the log-prob passes (reference, loss); bf16
    # rollout weights only where the loss itself runs in bf16 autocast (bf16=True)
    shared_prefix: bool = True
    rollout_bf16: bool = True
    # rollouts per forward and backward, gradients accumulated over a step (0: all on a CPU, up to 8 on a GPU;
    # thinkj.online.trl_batching, which also sets gradient checkpointing and vLLM rollouts)
    micro_batch: int = 0


def held_out_rows(run: GRPORun) -> list[dict[str, Any]]:
    """The held-out rows of ``run.eval_data``, both orders of each comparison (checked before anything is written)."""
    from thinkj.checks import check_range

    check_range("--eval-steps", run.eval_steps, low=1)
    rows, skipped = load_rl_rows(run.eval_data, run.template, twins=True, seed=run.seed)
    if not rows:
        raise RecordError(f"no usable held-out rows (ties skipped: {skipped['tie']})", path=run.eval_data)
    return rows


def _use_cpu(device: str) -> bool:
    import torch

    if device not in ("auto", "cpu", "gpu"):
        raise ThinkJError(f"--device {device!r}: choose auto, cpu or gpu")
    if device == "gpu" and not torch.cuda.is_available():
        raise ThinkJError("--device gpu was asked for but torch sees no CUDA device")
    return device == "cpu" or not torch.cuda.is_available()


def check_weights_with_twins(preset: str, weights: dict[str, Any], twins: str = "off") -> None:
    """Every weight through the rewards' one rule (:func:`thinkj.rewards.weights.check_weights`, via the preset:
    a weight the preset has, a finite number, >= 0 for a term weight); ``w_con`` > 0 only with twins."""
    get_preset(preset).weights(weights, where="--weight ")
    if twins not in TWIN_MODES:
        raise ThinkJError(f"--twins {twins!r}: choose {', '.join(TWIN_MODES)}")
    problem = needs_twins(weights, "--twins off") if twins == "off" else ""
    if problem:
        raise ThinkJError(f"--weight {problem}")


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``; None when it is missing or damaged (a damaged marker proves nothing)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def _last_checkpoint(ckpt_dir: Path) -> Path | None:
    """The highest-step ``checkpoint-N`` folder that the trainer finished writing (its trainer_state.json is last)."""
    done = [p for p in ckpt_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()
            and (p / "trainer_state.json").is_file()] if ckpt_dir.is_dir() else []
    return max(done, key=lambda p: int(p.name.split("-")[-1]), default=None)


def _finished_with(folder: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The completion record of ``folder`` when it was made with exactly these settings and inputs."""
    marker = _read_json(folder / DONE_MARKER)
    if marker and marker.get("run") == settings["run"] and marker.get("inputs") == settings["inputs"]:
        return marker
    return None


def step_layout_of(run: GRPORun, cpu: bool) -> StepLayout:
    """How ``run``'s steps are laid out on the device (:mod:`thinkj.online.trl_batching`)."""
    orders = 1 if run.twins == "off" else 2  # with twins a step holds both orders of prompts_per_step comparisons
    return step_layout(rollouts=run.num_generations * run.prompts_per_step * orders, micro_batch=run.micro_batch,
                       cpu=cpu, twins=run.twins != "off", extra=run.extra)


def _grpo_config(run: GRPORun, ckpt_dir: Path, cpu: bool) -> Any:
    """TRL's GRPOConfig for the run; a bad or unknown field fails here, before anything is written."""
    settings = grpo_settings(run, ckpt_dir, cpu)  # first: it repairs TRL's import flags
    from trl import GRPOConfig

    try:
        return GRPOConfig(**settings)
    except (TypeError, ValueError) as err:
        raise ThinkJError(f"TRL settings: {' '.join(str(err).split())}") from None


def grpo_settings(run: GRPORun, ckpt_dir: Path, cpu: bool) -> dict[str, Any]:
    """The fields :func:`_grpo_config` hands to GRPOConfig, each override checked (a GPU's can be read on a CPU)."""
    from thinkj.online.trl_compat import fix_trl_availability_flags

    fix_trl_availability_flags()
    from trl import GRPOConfig

    fields = set(inspect.signature(GRPOConfig).parameters)
    for key in run.extra:
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            raise ThinkJError(f"TRL override {key}={run.extra[key]!r}: GRPOConfig has no field {key!r}"
                              + (f" (did you mean {close[0]}?)" if close else ""))
    if run.twins != "off":
        fixed = [k for k in ("num_generations", "per_device_train_batch_size", "generation_batch_size",
                             "steps_per_generation", "use_vllm") if k in run.extra]
        if fixed:  # the twin sampler lays out a generation batch by these; vLLM's path regroups prompts itself
            raise ThinkJError(f"TRL override {fixed[0]}: with --twins the group and batch sizes come from "
                              "--num-generations and --prompts-per-step, and generation runs without vLLM")
    layout = step_layout_of(run, cpu)
    group = run.num_generations * (2 if run.twins == "union" else 1)  # TRL's group: consecutive rollouts
    settings = dict(
        output_dir=str(ckpt_dir), max_steps=run.steps, learning_rate=run.learning_rate, beta=run.beta,
        num_generations=group, **layout.grpo_config_fields(), max_prompt_length=run.max_prompt_length,
        max_completion_length=run.max_completion_length, temperature=run.temperature, seed=run.seed,
        use_cpu=cpu, bf16=not cpu, fp16=False, logging_steps=1, report_to="none",
        save_strategy="steps", save_steps=run.save_steps, save_total_limit=2,
        # [total, acc, format]: only the preset's score drives the advantage; the two terms are logged
        reward_weights=[1.0, 0.0, 0.0], dataloader_num_workers=0, disable_tqdm=False,
        # SFT checkpoints from LlamaFactory are saved with use_cache=false; without the KV cache every sampled
        # token recomputes the whole prompt (measured: 18 s instead of ~2 s per step on the tiny model). vLLM keeps
        # its own cache, and TRL hands these keys to vLLM's SamplingParams, which has no use_cache
        generation_kwargs={} if layout.rollout == "vllm" else {"use_cache": True},
    )
    merged = {**settings, **run.extra}  # extra GRPOConfig fields from the command line win
    if merged.get("top_k") is None and not merged.get("use_vllm"):
        # GRPOConfig's None means "no top-k"; transformers 5 fills a None from its global default and samples from
        # the top 50 (verl's vLLM rollouts sample the whole distribution). 0 is transformers' own "off"; TRL's vLLM
        # path maps None to vLLM's -1 itself, and older vLLM refuses a top_k of 0.
        merged["generation_kwargs"] = {**(merged.get("generation_kwargs") or {}), "top_k": 0}
    return merged


def build_trainer(run: GRPORun, config: Any, model: Any, tokenizer: Any, dataset: Any, *,
                  cpu: bool) -> tuple[Any, RecordingReward]:
    """TRL's GRPOTrainer as ``run`` trains: the preset's total reward (returned too: it keeps the last samples)
    beside its ``acc`` and ``format`` terms (logged, weight 0 in ``config``), the twin sampler when asked, and on the
    CPU the rollout speed-ups of :mod:`thinkj.online.trl_speed`."""
    from thinkj.online.trl_speed import fast_rollout_trainer

    total = RecordingReward(run.preset, twins=run.twins != "off", **run.weights)
    reward_funcs = [total, RewardComponent(run.preset, "acc", **run.weights),
                    RewardComponent(run.preset, "format", **run.weights)]
    if not hasattr(model, "warnings_issued"):
        model.warnings_issued = {}  # TRL 0.24 writes to this dict, which transformers 5 models no longer carry
    trainer_class = fast_rollout_trainer(_trainer_class(run.twins), prefix_cache=cpu and run.shared_prefix,
                                         bf16_weights=cpu and run.rollout_bf16 and bool(config.bf16))
    trainer = trainer_class(model=model, reward_funcs=reward_funcs, args=config, train_dataset=dataset,
                            processing_class=tokenizer)
    total.bind_trainer(trainer)  # pos/* diagnostics (and consistency with twins) in every step's log line
    return trainer, total


def run_trl_grpo(run: GRPORun, force: bool = False) -> dict[str, Any]:
    """Train, save the policy to ``out_dir/model``, plot ``out_dir/curves.png``; returns a summary dict.

    Every input is checked before anything in ``out_dir`` is touched: the data (exists, parses, has usable rows),
    the model (a local folder, a cached or reachable hub id), the preset's weights, the device and the GRPOConfig
    fields. A finished run made with the same settings and the same inputs -- the data file's sha256 and the
    model's identity (:mod:`thinkj.inference.identity`), so a file changed in place is not "the same" -- is
    returned, not redone, unless ``force``. A finished run with other settings, or with ``force``, is replaced only
    when the new run has finished: the new one trains in ``<out_dir>.next`` (:mod:`thinkj.folder_swap`). An
    interrupted run resumes from its last checkpoint; checkpoints of an unfinished run with other settings are
    never resumed. One launch at a time trains into ``out_dir`` (``<parent>/.locks/<name>.lock``): a second, started
    meanwhile, waits, then finds the finished run.
    """
    out = Path(run.out_dir)
    if out.exists() and not out.is_dir():
        raise ThinkJError(f"{out}: --out is a file, expected a folder")
    check_weights_with_twins(run.preset, run.weights, run.twins)
    twins = run.twins != "off"
    rows, skipped = load_rl_rows(run.data, run.template, twins=twins, seed=run.seed)
    if run.max_rows:
        rows = rows[: run.max_rows - run.max_rows % 2 if twins else run.max_rows]  # whole comparisons only
    if not rows:
        raise RecordError(f"no usable rows (ties skipped: {skipped['tie']})", path=run.data)
    if twins and len(rows) < 2 * run.prompts_per_step:
        raise ThinkJError(f"--prompts-per-step {run.prompts_per_step}: {run.data} has only {len(rows) // 2} "
                          "comparisons (each in both orders)")
    from thinkj.rewards.designs.twins import gold_balance

    gold_balance([r["label"] for r in rows], where=str(run.data))
    eval_rows = held_out_rows(run) if run.eval_data is not None else []
    from thinkj.inference.identity import check_model_source, model_identity
    from thinkj.models import resolve_model

    model_path = resolve_model(run.model)  # a catalog name (smollm2) is its converted folder
    check_model_source(model_path, what="--model")
    cpu = _use_cpu(run.device)
    described = asdict(run)
    for key, default in (("twins", "off"), ("shared_prefix", True), ("rollout_bf16", True),
                         ("eval_data", None), ("eval_steps", 10), ("micro_batch", 0)):
        if described[key] == default:
            del described[key]  # so runs finished before the option existed are still recognised as done
    settings = {"run": json.loads(json.dumps(described, default=str)),
                "inputs": {"data": fingerprint(run.data), "model": model_identity(model_path),
                           **({"eval_data": fingerprint(run.eval_data)} if eval_rows else {})}}
    # TRL's fields and the micro-batch checked now, with --out's own checkpoint folder (the run may train in its
    # staging twin, decided under the lock): a refused launch takes no lock and leaves nothing beside --out
    _grpo_config(run, out / "checkpoints", cpu)
    # one launch at a time trains into --out: a second waits, then finds the finished run (kept when the same)
    with exclusive(output_lock(out), f"[thinkj train rl] {out}", lambda line: print(line, flush=True)):
        restore(out)  # a swap that was interrupted (under the lock: never one another process is making)
        done = _finished_with(out, settings)
        if done and not force:
            return done
        finished = (out / DONE_MARKER).exists()
        work = staging_dir(out) if finished else out  # a finished run stays in place until its successor has finished
        if work != out and not force and _finished_with(work, settings):
            promote(work, out)  # the successor finished, the swap was interrupted
            return json.loads((out / DONE_MARKER).read_text(encoding="utf-8"))
        ckpt_dir = work / "checkpoints"
        config = _grpo_config(run, ckpt_dir, cpu)
        layout = step_layout_of(run, cpu)
        print(f"# {layout.describe()}", flush=True)

        # Nothing was changed on disk before this line.
        if force and work != out:
            shutil.rmtree(work, ignore_errors=True)
        elif force or _read_json(work / "run_settings.json") != settings:
            # new settings (model, data, steps, ...) or --force: never resume another run's checkpoints
            shutil.rmtree(ckpt_dir, ignore_errors=True)
            (work / DONE_MARKER).unlink(missing_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        write_json(work / "run_settings.json", settings)

        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        last = _last_checkpoint(ckpt_dir)
        # A run that reached its last step and died saving (disk full) resumes from a checkpoint at max_steps, and
        # transformers 5.5 + TRL 0.24 then train one step past it (global_step 25 of 24; experiments/LOG.md, session
        # 5): that checkpoint is the run's result, and only the final save is redone.
        reached = last is not None and ((_read_json(last / "trainer_state.json") or {}).get("global_step", 0)
                                        >= run.steps)
        model = AutoModelForCausalLM.from_pretrained(last if reached else model_path,
                                                     dtype="float32" if cpu else "bfloat16")
        trainer, total = build_trainer(run, config, model, tokenizer, Dataset.from_list(rows), cpu=cpu)
        held_out = None
        if eval_rows:
            from thinkj.online.trl_eval import HeldOutEval

            held_out = HeldOutEval(eval_rows, run.preset, run.eval_steps, run.max_completion_length, **run.weights)
            trainer.add_callback(held_out)
        if reached:
            from transformers import TrainerState

            trainer.state = TrainerState.load_from_json(str(last / "trainer_state.json"))
        else:
            # the checkpoint found above, not the trainer's own pick (the highest number, even if half written)
            trainer.train(resume_from_checkpoint=str(last) if last is not None else None)

        trainer.save_model(str(work / "model"))
        tokenizer.save_pretrained(str(work / "model"))
        write_jsonl(work / "last_samples.jsonl", total.last_samples)  # what the judge wrote in the last step, and its reward
        if held_out is not None:
            write_jsonl(work / "eval_samples.jsonl", held_out.samples)  # every evaluation's held-out verdicts
        trainer.state.save_to_json(str(work / "trainer_state.json"))

        from thinkj.online.curves import load_metrics, plot_curves

        curves = plot_curves(load_metrics(work / "trainer_state.json"), work / "curves.png",
                             title=f"TRL GRPO ({run.preset})")
        history = [h for h in trainer.state.log_history if "reward" in h]
        # paths name the final folder: after the swap, that is where the files are
        summary = {
            "engine": "trl", "algo": "grpo", "model_dir": str(out / "model"), "curves": str(out / curves.name),
            "log": str(out / "trainer_state.json"), "samples": str(out / "last_samples.jsonl"),
            "rows": len(rows), "skipped_tie": skipped["tie"], "twins": run.twins,
            "steps": trainer.state.global_step, "device": "cpu" if cpu else "gpu",
            "layout": {"rollouts": layout.rollouts, "micro_batch": layout.micro_batch, "accumulation": layout.accumulation,
                       "gradient_checkpointing": layout.gradient_checkpointing, "rollout": layout.rollout,
                       "rollout_why": layout.rollout_why},
            "first_reward": history[0]["reward"] if history else None, "last_reward": history[-1]["reward"] if history else None,
            "run": settings["run"], "inputs": settings["inputs"],
        }
        write_json(work / DONE_MARKER, summary)  # last: the run is complete
        if work != out:
            promote(work, out)
        return summary
