"""Evaluation of judges on RewardBench, RM-Bench, Auto-J and PreferencePair sets (paper §4).

``specs`` (declarative benchmark rules, cited), ``loaders`` (data -> comparisons), ``run`` (judge both orders
through the cache, write records and results JSON), ``metrics`` (scores from records alone), ``scalar``
(Bradley-Terry classifiers), ``cli`` (``thinkj eval run|score|compare``), ``row_compare`` (the demo's rows set against
each other on the same judgments: the pipeline's ``compare`` stage).
"""
