"""Help texts shared by the ``thinkj train`` commands of :mod:`thinkj.train.cli` and :mod:`thinkj.offline.cli`."""

CONFIG_HELP = "stage YAML: a path or a name in configs/llamafactory/ (judge_sft, critic_sft, dpo, bt_rm, sft_direct)"
OVERRIDES_HELP = "LlamaFactory key=value overrides, applied last (e.g. learning_rate=1e-6 max_steps=3)"
