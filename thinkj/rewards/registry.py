"""Every reward by name: the one place that registers the per-sample presets and the group rewards.

Reward modules define functions, default weights and keys and never register themselves; this module imports them
and builds the table, so ``get_preset`` / ``get_group_reward`` see every reward whichever module a caller imported
first. Adding a reward touches its own module and the tables below.
"""

from __future__ import annotations

from thinkj.registry import Registry
from thinkj.rewards.designs.competition import COMPETITION_DEFAULTS, answer_gold_problem, competition_reward
from thinkj.rewards.designs.grm import GRM_DEFAULTS, GRM_KEYS, GRM_KINDS, grm_listwise_group
from thinkj.rewards.designs.judge import LLAMA_WEIGHTS, QWEN_WEIGHTS, margin_reward, thinkj_reward, thinkj_subtractive_reward
from thinkj.rewards.designs.multi_objective import MULTI_DEFAULTS, MULTI_KEYS, multi_objective_reward, scores_gold_problem
from thinkj.rewards.designs.pairwise_group import (
    PAIRWISE_GROUP_CHOICES,
    PAIRWISE_GROUP_DEFAULTS,
    PAIRWISE_GROUP_KEYS,
    PAIRWISE_GROUP_KINDS,
    pairwise_group,
)
from thinkj.rewards.designs.pairwise_rm import PAIRWISE_DEFAULTS, PAIRWISE_KEYS, PAIRWISE_KINDS, round_robin_group
from thinkj.rewards.designs.upstream_thinkj import cot_public_reward, margin_public_reward, strength_public_reward
from thinkj.rewards.designs.xml_judge import (
    XML_DEFAULTS,
    XML_GROUP_DEFAULTS,
    XML_KEYS,
    XML_KINDS,
    xml_judge_group_reward,
    xml_judge_reward,
)
from thinkj.rewards.gold import pair_gold, pair_label
from thinkj.rewards.presets import GroupReward, Preset, per_sample_group

PRESETS: Registry[Preset] = Registry("reward preset")
GROUP_REWARDS: Registry[GroupReward] = Registry("group reward")


def register_preset(preset: Preset) -> Preset:
    return PRESETS.add(preset.name, preset)


def get_preset(name: str) -> Preset:
    return PRESETS.lookup(name)


def register_group_reward(reward: GroupReward) -> GroupReward:
    return GROUP_REWARDS.add(reward.name, reward)


def get_group_reward(name: str) -> GroupReward:
    return GROUP_REWARDS.lookup(name)


def _label_problem(gt: object) -> str:
    return pair_label(gt).error


def _pair_problem(gt: object) -> str:
    return pair_gold(gt).error


# Per-sample presets: the paper's readings (thinkj/rewards/designs/judge.py), the public code's rules (public.py), the seeds.
# gold_problem: the ground-truth fields the reward reads (thinkj/rewards/gold.py).
MULTI_OBJECTIVE = Preset("multi_objective", multi_objective_reward, dict(MULTI_DEFAULTS),
                         "seed 004 exact + off-by-one + MAE + format, failure penalty, perfect bonus",
                         template="helpsteer2_attributes_v1", gold_problem=scores_gold_problem)
XML_JUDGE = Preset("xml_judge", xml_judge_reward, dict(XML_DEFAULTS),
                   "seed 000 XML judge, one completion (pass group_acc for the power scaling)", template="xml_judge_v1",
                   kinds=XML_KINDS, gold_problem=_label_problem)
for _preset in (
    Preset("thinkj_qwen", thinkj_reward, dict(QWEN_WEIGHTS),
           "Think-J accuracy + format + strength (assumption: our reading of the lost equations); "
           "Table 8's best for Qwen2.5-32B", gold_problem=_pair_problem),
    Preset("thinkj_llama", thinkj_reward, dict(LLAMA_WEIGHTS),
           "Think-J accuracy + format (assumption, as thinkj_qwen); Table 8's best for Llama-3-8B",
           gold_problem=_pair_problem),
    Preset("thinkj_subtractive", thinkj_subtractive_reward, {"w_acc": 1.0, "w_fmt": 1.0, "w_str": 1.0, "w_con": 0.0},
           "the other reading: accuracy + format + the public code's subtractive strength term "
           "(-|gold-pred|/8, -0.5 out of range)", gold_problem=_pair_problem),
    Preset("cot_binary", cot_public_reward, {"unparsed_score": 0.5},
           "public reward_cot.py exactly: 1 right, 0 wrong, 0.5 unparsed; (b) wins when both appear",
           template="judge_cot_v2", gold_problem=_label_problem),
    Preset("strength_public", strength_public_reward, {},
           "public reward_strength.py exactly: 1-|gold-pred|/8, 0.5 out of range, 0 wrong/unparsed; "
           "reads 'the strength is [[N]]'", template="judge_strength_public_v1", gold_problem=_pair_problem),
    Preset("margin", margin_reward, {"w_fmt": 1.0, "w_margin": 1.0},
           "assumption: our reading of Appendix A.1 on the paper's [[s_a]] and [[s_b]] sentence, "
           "with a format term", template="double_score_v2", gold_problem=_label_problem),
    Preset("margin_public", margin_public_reward, {},
           "public reward_score.py exactly: 1+margin right, -margin wrong, 0.5 unparsed; "
           "<Score 1>/<Score 2> tags", template="double_score_public_v1", gold_problem=_label_problem),
    Preset("competition", competition_reward, dict(COMPETITION_DEFAULTS),
           "seed 002 pirate/knight/viking construct: tags, format, length, originality, winner, answer",
           template="none (math QA with the construct system prompt COMPETITION_SYSTEM_PROMPT)",
           gold_problem=answer_gold_problem),
    MULTI_OBJECTIVE,
    XML_JUDGE,
):
    register_preset(_preset)

# Group rewards: they see every completion of one prompt at once (thinkj/rewards/adapters/trl_group.py has the TRL adapter,
# thinkj/rewards/adapters/verl_group.py the verl reward manager).
for _group in (
    GroupReward("grm_listwise", grm_listwise_group, dict(GRM_DEFAULTS), GRM_KEYS,
                "seed 001 listwise generative RM over an OpenAI-compatible judge", kinds=GRM_KINDS),
    GroupReward("multi_objective", per_sample_group(MULTI_OBJECTIVE), dict(MULTI_DEFAULTS), MULTI_KEYS,
                "seed 004 reward with its diversity check (groups < 50% unique skipped)", min_unique_ratio=0.5,
                gold_problem=scores_gold_problem),
    GroupReward("thinkj_pairwise", pairwise_group, dict(PAIRWISE_GROUP_DEFAULTS), PAIRWISE_GROUP_KEYS,
                "trained Think-J judge over HTTP: round robin / anchor / knockout, both orders, "
                "optional strength weights and Bradley-Terry", kinds=PAIRWISE_GROUP_KINDS,
                choices=PAIRWISE_GROUP_CHOICES),
    GroupReward("thinkj_round_robin", round_robin_group, dict(PAIRWISE_DEFAULTS), PAIRWISE_KEYS,
                "trained Think-J judge over HTTP: round robin within the group, both orders", kinds=PAIRWISE_KINDS),
    GroupReward("xml_judge", xml_judge_group_reward, dict(XML_GROUP_DEFAULTS), XML_KEYS,
                "seed 000 XML judge: correct * group_acc**power + bonuses when correct", kinds=XML_KINDS,
                gold_problem=_label_problem),
):
    register_group_reward(_group)
