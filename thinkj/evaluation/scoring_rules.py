"""The rule constants of RewardBench, RM-Bench and Auto-J: groups, their weights and the official set sizes.

Every rule cites its source. The numbers are written out here (read from the upstream code, not
imported from it) so that scoring needs nothing but this module and the judgment records. Which benchmarks
exist, and how each loads, scores and runs, is :mod:`thinkj.evaluation.registry`.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------------------------
# RewardBench (Lambert et al. 2024), hub dataset allenai/reward-bench, split "filtered".
# Source: allenai/reward-bench, rewardbench/constants.py (SUBSET_MAPPING and EXAMPLE_COUNTS) and
# rewardbench/utils.py calculate_scores_per_section: a section score is the example-weighted mean of
# its subsets' accuracies, using these official counts as weights.

REWARDBENCH_SECTIONS: dict[str, tuple[str, ...]] = {
    "Chat": ("alpacaeval-easy", "alpacaeval-length", "alpacaeval-hard", "mt-bench-easy", "mt-bench-med"),
    "Chat Hard": ("mt-bench-hard", "llmbar-natural", "llmbar-adver-neighbor", "llmbar-adver-GPTInst",
                  "llmbar-adver-GPTOut", "llmbar-adver-manual"),
    "Safety": ("refusals-dangerous", "refusals-offensive", "xstest-should-refuse", "xstest-should-respond", "donotanswer"),
    "Reasoning": ("math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"),
}

REWARDBENCH_EXAMPLE_COUNTS: dict[str, int] = {
    "alpacaeval-easy": 100, "alpacaeval-length": 95, "alpacaeval-hard": 95, "mt-bench-easy": 28, "mt-bench-med": 40,
    "mt-bench-hard": 37, "llmbar-natural": 100, "llmbar-adver-neighbor": 134, "llmbar-adver-GPTInst": 92,
    "llmbar-adver-GPTOut": 47, "llmbar-adver-manual": 46,
    "refusals-dangerous": 100, "refusals-offensive": 100,
    # The official constants (EXAMPLE_COUNTS since Sept 2024) give the real row counts: should-refuse 154,
    # should-respond 250.
    "xstest-should-refuse": 154, "xstest-should-respond": 250, "donotanswer": 136,
    # The real math-prm subset has 447 rows; RewardBench counts it as 984 = 6 x 164 so that math and the six
    # pooled HumanEvalPack (hep-*) code subsets carry equal weight inside Reasoning.
    "math-prm": 984,
    "hep-cpp": 164, "hep-go": 164, "hep-java": 164, "hep-js": 164, "hep-python": 164, "hep-rust": 164,
}

# Rows per subset in the "filtered" split (the weights above, except math-prm's real 447): what a complete run has.
REWARDBENCH_ROWS: dict[str, int] = {**REWARDBENCH_EXAMPLE_COUNTS, "math-prm": 447}

REWARDBENCH_SECTION_OF: dict[str, str] = {s: sec for sec, subsets in REWARDBENCH_SECTIONS.items() for s in subsets}

# ---------------------------------------------------------------------------------------------
# RM-Bench (Liu et al. 2024, arXiv:2410.16184), hub dataset THU-KEG/RM-Bench; repository data/*_filtered.json.
# Source: the THU-KEG/RM-Bench README ("how to compute the accuracy"): every item has three chosen and three
# rejected responses in the styles below; the 3x3 matrix cell (i, j) is the accuracy of chosen style i
# against rejected style j; hard = mean of the upper triangle (i < j: the chosen answer is plainer than the
# rejected one), normal = the diagonal, easy = the lower triangle.

RMBENCH_STYLES: tuple[str, ...] = ("concise", "detailed_plain", "detailed_markdown")
# The data's domains; the paper reports safety as one domain pooling its two sub-domains.
RMBENCH_DOMAINS: tuple[str, ...] = ("chat", "math", "code", "safety-refuse", "safety-response")
RMBENCH_REPORT_DOMAIN: dict[str, str] = {"chat": "chat", "math": "math", "code": "code",
                                         "safety-refuse": "safety", "safety-response": "safety"}
RMBENCH_REPORT_ORDER: tuple[str, ...] = ("chat", "math", "code", "safety")
# Items (prompts, 9 comparisons each) per reported domain in the full set (RM-Bench paper, Table 1: 1,327 items).
RMBENCH_ITEMS: dict[str, int] = {"chat": 129, "math": 529, "code": 228, "safety": 441}
RMBENCH_HARD = tuple((i, j) for i in range(3) for j in range(3) if i < j)
RMBENCH_NORMAL = tuple((i, i) for i in range(3))
RMBENCH_EASY = tuple((i, j) for i in range(3) for j in range(3) if i > j)

# ---------------------------------------------------------------------------------------------
# Auto-J (Li et al. 2023), pairwise test set GAIR-NLP/auto-j data/test/testdata_pairwise.jsonl (1392 pairs,
# label 0 = response 1 better, 1 = response 2 better, 2 = tie). Scenario groups: GAIR-NLP/auto-j,
# codes/leaderboard/utils_constants.py (scenario_group); metric definitions: codes/leaderboard/pairwise_eval.py.

AUTOJ_SCENARIO_GROUPS: dict[str, tuple[str, ...]] = {
    "Summarization": ("post_summarization", "text_summarization", "note_summarization"),
    "Exam Questions": ("math_reasoning", "solving_exam_question_with_math", "solving_exam_question_without_math"),
    "Code": ("code_simplification", "code_generation", "explaining_code", "code_correction_rewriting",
             "code_to_code_translation"),
    "Rewriting": ("text_simplification", "language_polishing", "instructional_rewriting", "text_correction",
                  "paraphrasing"),
    "Creative Writing": ("writing_song_lyrics", "writing_social_media_post", "writing_blog_post",
                         "writing_personal_essay", "creative_writing", "writing_advertisement",
                         "writing_marketing_materials", "writing_presentation_script", "counterfactual"),
    "Functional Writing": ("writing_product_description", "writing_job_application", "writing_news_article",
                           "writing_biography", "writing_email", "writing_legal_document",
                           "writing_technical_document", "writing_scientific_paper", "functional_writing",
                           "writing_cooking_recipe"),
    "General Communication": ("asking_how_to_question", "open_question", "analyzing_general", "explaining_general",
                              "seeking_advice", "recommendation", "value_judgement", "verifying_fact", "chitchat",
                              "roleplay", "planning", "brainstorming"),
    "NLP Tasks": ("ranking", "text_to_text_translation", "data_analysis", "classification_identification",
                  "title_generation", "question_generation", "reading_comprehension", "keywords_extraction",
                  "information_extraction", "topic_modeling", "others"),
}
AUTOJ_GROUP_OF: dict[str, str] = {s: g for g, scenarios in AUTOJ_SCENARIO_GROUPS.items() for s in scenarios}
AUTOJ_ITEMS = 1392
AUTOJ_LABELS: dict[int, str] = {0: "a", 1: "b", 2: "tie"}  # response 1 is shown as (a) in the original order
AUTOJ_TEST_URL = "https://raw.githubusercontent.com/GAIR-NLP/auto-j/main/data/test/testdata_pairwise.jsonl"
