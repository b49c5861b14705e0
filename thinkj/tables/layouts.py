"""Which results fill which cell of each paper table: declarative specs, one per table.

A results JSON (see ``thinkj/tables/results.py``) fills a cell when
  * its ``benchmark`` is the column's benchmark,
  * its ``tags`` match the column group's tags (e.g. ``model``) and the table's ``fixed_tags``, and
  * its ``tags`` match the row: for every row-key column of the paper CSV, the tag named in ``row_tags``
    equals the paper's label (or one of the table's ``aliases`` for it); an empty paper label needs the
    tag absent or empty. Tag values are compared ignoring case, spaces, ``-`` and ``_``; a model tag may
    carry a hub organisation (``meta-llama/Meta-Llama-3-8B-Instruct``).
Table 8 is a one-at-a-time ablation: the row names one weight and its value, and the other weights must
be the column group's defaults (a missing tag counts as the default).
Views of benchmarks the paper does not report (RewardBench 2, JudgeBench) have no paper rows: their rows are
the distinct values of the row tags among the results given (``rows_from_results``), one row per distinct combination.

The metric read for a column is ``Metric.path`` inside the results' ``metrics`` dict, or a derived value
(``derive``), e.g. RewardBench's pooled Chat + Chat Hard of Tables 5-7.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from thinkj.rewards.designs.judge import LLAMA_WEIGHTS, QWEN_WEIGHTS  # Table 8's per-model defaults: the presets' own

# RewardBench's example counts for the two chat sections (its EXAMPLE_COUNTS: alpacaeval-easy 100,
# alpacaeval-length 95, alpacaeval-hard 95, mt-bench-easy 28, mt-bench-med 40 -> 358; mt-bench-hard 37,
# llmbar-natural 100, llmbar-adver-neighbor 134, llmbar-adver-GPTInst 92, llmbar-adver-GPTOut 47,
# llmbar-adver-manual 46 -> 456). Tables 5-7 pool the two sections with these weights.
REWARDBENCH_CHAT_N, REWARDBENCH_CHAT_HARD_N = 358, 456

# The paper does not state its protocol; we take it to be `single` (every judgment a trial: RewardBench's and
# RM-Bench's own scorers judge one order). A result scored with another protocol is marked in the tables.
PAPER_PROTOCOL = "single"
# Likewise an unparsable verdict scores 0 by default (`metrics.unparsed` = "wrong"); a run scored with
# --unparsed-half (`metrics.unparsed` = "half": 0.5 instead) is marked.
UNPARSED_HALF = "half"
# Auto-J's scorer applies its own rule over both orders, so --protocol and --unparsed-half change none of its
# numbers (thinkj.evaluation score_autoj): they are recorded in its metrics but earn no mark.
RULE_FREE_BENCHMARKS = ("autoj",)

# RewardBench 2's Ties score is 0.30 + 0.30 + 0.20 + 0.20 of shares plus 0.01 x a mean tanh in [-1, 1], so it
# lies in [-1, 101]; the overall (mean of six subsets, rounded to 2 decimals) in [-0.17, 100.17].
RB2_TIES_RANGE = (-1.0, 101.0)
RB2_OVERALL_RANGE = (-0.17, 100.17)


@dataclass(frozen=True)
class Metric:
    benchmark: str                 # the results JSON "benchmark"
    path: tuple[str, ...] = ()     # keys into "metrics"
    derive: str | None = None      # a function in thinkj.tables.metrics.DERIVED instead of a path
    bounds: tuple[float, float] = (0.0, 100.0)  # values outside it are refused (not a score of this metric)


@dataclass(frozen=True)
class Column:
    csv: str                       # the column in paper_results/table<N>.csv ("" for tables the paper lacks)
    header: str                    # short header in the rendered table
    metric: Metric


@dataclass(frozen=True)
class ColumnGroup:
    label: str                     # printed above its columns ("" = no group header)
    columns: tuple[Column, ...]
    tags: dict[str, tuple[str, ...]] = field(default_factory=dict)      # tag -> accepted values
    defaults: dict[str, float] = field(default_factory=dict)            # one-at-a-time ablation defaults


@dataclass(frozen=True)
class TableSpec:
    key: str                       # "4", or "demo"
    title: str
    row_keys: tuple[str, ...]      # CSV columns that name a row
    row_tags: dict[str, str]       # row-key column -> tag name
    groups: tuple[ColumnGroup, ...]
    fixed_tags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)   # paper label -> extra tag values
    ablation: bool = False         # Table 8: rows are (parameter, value) varied from the group defaults
    base_label: str | None = None  # the untrained model's row label: tags.method = base also fills it
    shared_rows: tuple[str, ...] = ()  # rows that use no training set: the group's tags may be absent
    paper: bool = True             # False: no paper counterpart (the demo); rows come from ``rows``
    rows: tuple[tuple[str, ...], ...] = ()
    rows_from_results: bool = False  # no paper rows: one row per distinct row-tag values among the results
    marks: bool | None = None      # mark runs that are not full default-protocol runs (None: only beside the paper)
    caption: str = ""              # printed under the title
    notes: str = ""

    @property
    def shows_marks(self) -> bool:
        return self.paper if self.marks is None else self.marks

    @property
    def columns(self) -> list[tuple[ColumnGroup, Column]]:
        return [(g, c) for g in self.groups for c in g.columns]


def _rb(prefix: str, sections: tuple[str, ...] = ("Chat", "Chat Hard", "Safety", "Reasoning")) -> tuple[Column, ...]:
    cols = [Column(f"{prefix}RewardBench/{s}", s, Metric("rewardbench", ("sections", s))) for s in sections]
    return (*cols, Column(f"{prefix}RewardBench/Overall", "Overall", Metric("rewardbench", ("overall",))))


def _rb_pooled() -> tuple[Column, ...]:
    return (Column("RewardBench/Chat+Chat Hard", "Chat (pooled)", Metric("rewardbench", derive="rewardbench_chat_pooled")),
            Column("RewardBench/Safety", "Safety", Metric("rewardbench", ("sections", "Safety"))),
            Column("RewardBench/Reasoning", "Reasoning", Metric("rewardbench", ("sections", "Reasoning"))),
            Column("RewardBench/Overall", "Overall", Metric("rewardbench", ("overall",))))


LLAMA_8B = ("Llama-3-8B-Instruct", "Meta-Llama-3-8B-Instruct", "Llama3-8B-Instruct")
QWEN_7B = ("Qwen2.5-7B-Instruct",)
QWEN_32B = ("Qwen2.5-32B-Instruct",)
BASE_ALIASES = {"Llama-3-8B-Inst": ("base", "baseline"), "baseline": ("base",)}


def _by_model(labels: tuple[str, str], models: tuple[tuple[str, ...], tuple[str, ...]]) -> tuple[ColumnGroup, ...]:
    return tuple(ColumnGroup(label, _rb(f"{label}/"), tags={"model": accepted}) for label, accepted in zip(labels, models))


SPECS: dict[str, TableSpec] = {}


def _add(spec: TableSpec) -> None:
    SPECS[spec.key] = spec


_add(TableSpec(
    "2", "Think-J against proprietary and fine-tuned judges",
    row_keys=("model",), row_tags={"model": "model"},
    groups=(ColumnGroup("RewardBench", _rb("")[:5]),
            ColumnGroup("RM-Bench", (Column("RM-Bench/Overall", "Overall", Metric("rmbench", ("overall",))),)),
            # Auto-J's official pairwise agreement: both orders equal the label (pairwise_eval.py correct_both).
            ColumnGroup("Auto-J", (Column("Auto-J/Agreement", "Agreement (both orders)", Metric("autoj", ("agreement",))),))),
    notes="row = tags.model (the judge's name as the paper prints it, e.g. Think-J-Qwen-2.5-32B)"))

_add(TableSpec(
    "3", "Baselines and Think-J from the same base model and training data",
    row_keys=("model", "method"), row_tags={"model": "model", "method": "method"},
    groups=(ColumnGroup("HH-RLHF", _rb("HH-RLHF/"), tags={"train_data": ("HH-RLHF",)}),
            ColumnGroup("HelpSteer2-Preference", _rb("HelpSteer2-Preference/"),
                        tags={"train_data": ("HelpSteer2-Preference", "HelpSteer2")})),
    aliases={"Direct Prompt (w/o CoT)": ("base", "direct"), "Direct Prompt (w/ CoT)": ("direct-cot",)},
    base_label="Direct Prompt (w/o CoT)", shared_rows=("Direct Prompt (w/o CoT)", "Direct Prompt (w/ CoT)", "SFT on LIMJ707"),
    notes="row = tags.model + tags.method; column group = tags.train_data (absent for rows that use no training set: "
          "Direct Prompt, SFT on LIMJ707)"))

_add(TableSpec(
    "4", "Offline and online thinking optimisation",
    row_keys=("method",), row_tags={"method": "method"},
    groups=_by_model(("Llama-3-8B-Instruct", "Qwen-2.5-7B-Instruct"), (LLAMA_8B, QWEN_7B)),
    aliases={"baseline": ("base",), "offline (Critic-guided)": ("offline",), "online (GRPO)": ("online",)},
    base_label="baseline", notes="row = tags.method; column group = tags.model"))

_LLAMA_ONLY = {"model": LLAMA_8B}

_add(TableSpec(
    "5", "Data selection for thinking initialisation (Llama-3-8B-Instruct)",
    row_keys=("init_data", "method"), row_tags={"init_data": "init_data", "method": "selection"},
    groups=(ColumnGroup("RewardBench", _rb_pooled()),), fixed_tags=_LLAMA_ONLY, aliases=BASE_ALIASES,
    base_label="Llama-3-8B-Inst",
    notes="row = tags.init_data + tags.selection; model Llama-3-8B-Instruct; the untrained model: tags.method 'base'"))

_add(TableSpec(
    "6", "Initialisation and trace clipping before offline / online RL (Llama-3-8B-Instruct)",
    row_keys=("init", "rl"), row_tags={"init": "init", "rl": "rl"},
    groups=(ColumnGroup("RewardBench", _rb_pooled()),), fixed_tags=_LLAMA_ONLY, aliases=BASE_ALIASES,
    base_label="Llama-3-8B-Inst",
    notes="row = tags.init ('no init' | 'w/o clip' | 'w/ clip') + tags.rl ('offline' | 'online'); untrained: tags.method 'base'"))

_add(TableSpec(
    "7", "Iterated offline learning (Llama-3-8B-Instruct)",
    row_keys=("train_data", "method"), row_tags={"train_data": "train_data", "method": "iteration"},
    groups=(ColumnGroup("RewardBench", _rb_pooled()),), fixed_tags=_LLAMA_ONLY, base_label="Llama-3-8B-Inst",
    aliases={**BASE_ALIASES, "iteration 1": ("1",), "iteration 2": ("2",), "iteration 3": ("3",),
             "Helpsteer2": ("HelpSteer2-Preference",)},
    notes="row = tags.train_data + tags.iteration (1, 2, 3); the untrained model: tags.method 'base'"))

_add(TableSpec(
    "8", "Reward weights of online GRPO (w_acc = 1.0)",
    row_keys=("parameter", "value"), row_tags={"parameter": "parameter", "value": "value"},
    groups=(ColumnGroup("Qwen2.5-32B-Instruct", _rb("Qwen2.5-32B-Instruct/"), tags={"model": QWEN_32B},
                        defaults={k: QWEN_WEIGHTS[k] for k in ("w_fmt", "w_str")}),
            ColumnGroup("Meta-Llama-3-8B-Instruct", _rb("Meta-Llama-3-8B-Instruct/"), tags={"model": LLAMA_8B},
                        defaults={k: LLAMA_WEIGHTS[k] for k in ("w_fmt", "w_str")})),
    ablation=True,
    notes="row = tags.w_fmt / tags.w_str: the row's weight has its value, the other weight its model default "
          f"(Qwen w_str {QWEN_WEIGHTS['w_str']}, Llama w_str {LLAMA_WEIGHTS['w_str']}; absent = default, "
          "but at least one must be given); column group = tags.model"))

_add(TableSpec(
    "9", "Margin (double-score) reward against the Think-J reward for GRPO",
    row_keys=("method",), row_tags={"method": "method"},
    groups=_by_model(("Llama-3-8B-Instruct", "Qwen-2.5-7B-Instruct"), (LLAMA_8B, QWEN_7B)),
    aliases={"online (GRPO w/ margin)": ("grpo-margin",), "online (GRPO w/o margin)": ("online (GRPO)", "grpo")},
    notes="row = tags.method; column group = tags.model"))

# The smoke run's table: the Table 4 layout on the tiny model and the synthetic task. It has no paper
# counterpart, so cells show our values only. The benchmark slices appear when their results exist.
# Consistency = `thinkj eval score`'s position_consistency (both orders pick the same response); Unparsed = its
# parse_failure (share of outputs without a readable verdict, which count as wrong).
DEMO_METHODS = ("base", "init", "offline", "online")
_add(TableSpec(
    "demo", "Demo run: tiny model or SmolLM2, generated judging task (Table 4 layout)",
    row_keys=("method",), row_tags={"method": "method"},
    groups=(ColumnGroup("synthetic", (Column("", "Accuracy", Metric("synthetic", ("accuracy",))),
                                      Column("", "Consistency", Metric("synthetic", ("position_consistency",))),
                                      Column("", "Unparsed", Metric("synthetic", ("parse_failure",))))),
            ColumnGroup("RewardBench slice", (Column("", "Overall", Metric("rewardbench", ("overall",))),)),
            ColumnGroup("RM-Bench slice", (Column("", "Overall", Metric("rmbench", ("overall",))),)),
            ColumnGroup("Auto-J slice", (Column("", "Agreement", Metric("autoj", ("agreement",))),))),
    # one demo run holds one model: the tiny one (make demo-tiny) or SmolLM2 (make demo)
    fixed_tags={"model": ("tiny", "smollm2")}, paper=False, rows=tuple((m,) for m in DEMO_METHODS),
    notes="row = tags.method (base | init | offline | online); tags.model = 'tiny' or 'smollm2'; empty benchmark "
          "groups are dropped"))

# The CPU rehearsal of the reproduction pipeline (scripts/reproduce_cpu.sh): one row per trained judge of the run
# folder -- the method, plus the weights an ablation run changed -- on the generated task's held-out pairs and the
# benchmark slices it evaluated. A rehearsal shows that the stages connect, not how good the method is.
_add(TableSpec(
    "rehearsal", "CPU rehearsal of the reproduction pipeline (our runs only)",
    row_keys=("model", "method", "w_fmt", "w_str", "w_con"),
    row_tags={"model": "model", "method": "method", "w_fmt": "w_fmt", "w_str": "w_str", "w_con": "w_con"},
    groups=(ColumnGroup("Held-out task pairs", (Column("", "Accuracy", Metric("synthetic", ("accuracy",))),
                                                Column("", "Consistency", Metric("synthetic", ("position_consistency",))),
                                                Column("", "Unparsed", Metric("synthetic", ("parse_failure",))))),
            ColumnGroup("RM-Bench slice", (Column("", "Overall", Metric("rmbench", ("overall",))),)),
            ColumnGroup("Auto-J slice", (Column("", "Agreement", Metric("autoj", ("agreement",))),)),
            ColumnGroup("RewardBench slice", (Column("", "Overall", Metric("rewardbench", ("overall",))),))),
    paper=False, rows_from_results=True, marks=True,
    caption="Our runs only, at CPU scale: they show that every stage runs and connects, not the method's quality.",
    notes="row = tags.model + tags.method + tags.w_fmt + tags.w_str + tags.w_con (absent: empty); marked: incomplete"))

# Benchmarks the Think-J paper does not report: our runs only, one row per model / method, never a paper number.
# A run that is incomplete (metrics.missing, else complete alone) or not official (RewardBench 2's round robin,
# metrics.official false) is marked like a partial run in a paper table.
OUR_RUNS_ONLY = "Our runs only: the Think-J paper has no {} table, so there is no paper number to compare with."
RB2_SUBSETS = ("Factuality", "Precise IF", "Math", "Safety", "Focus", "Ties")
_add(TableSpec(
    "rewardbench2", "RewardBench 2: the six subsets and overall",
    row_keys=("model", "method"), row_tags={"model": "model", "method": "method"},
    groups=(ColumnGroup("", (*(Column("", s, Metric("rewardbench2", ("subsets", s),
                                                   bounds=RB2_TIES_RANGE if s == "Ties" else (0.0, 100.0)))
                                for s in RB2_SUBSETS),
                             Column("", "Overall", Metric("rewardbench2", ("overall",), bounds=RB2_OVERALL_RANGE)))),),
    paper=False, rows_from_results=True, marks=True, caption=OUR_RUNS_ONLY.format("RewardBench 2"),
    notes="row = tags.model + tags.method (absent: empty), one row per distinct (model, method) among the results; "
          "marked: incomplete, or not official (round-robin mode)"))

JUDGEBENCH_CATEGORIES = ("knowledge", "reasoning", "math", "coding")
_add(TableSpec(
    "judgebench", "JudgeBench: accuracy per category and overall",
    row_keys=("model", "method"), row_tags={"model": "model", "method": "method"},
    groups=(ColumnGroup("", (*(Column("", c.capitalize(), Metric("judgebench", ("categories", c)))
                               for c in JUDGEBENCH_CATEGORIES),
                             Column("", "Overall", Metric("judgebench", ("accuracy",))))),),
    paper=False, rows_from_results=True, marks=True, caption=OUR_RUNS_ONLY.format("JudgeBench"),
    notes="row = tags.model + tags.method (absent: empty), one row per distinct (model, method) among the results; "
          "marked: incomplete"))

# Tables that hold no evaluation results: shown as the paper prints them.
PAPER_ONLY = {"1": "LIMJ707 selection counts", "10": "offline hyper-parameters", "11": "online hyper-parameters"}


def get_spec(key: str | int) -> TableSpec:
    key = str(key)
    if key not in SPECS:
        raise KeyError(f"no table spec {key!r}; known: {sorted(SPECS, key=lambda k: (not k.isdigit(), k.zfill(3)))}")
    return SPECS[key]
