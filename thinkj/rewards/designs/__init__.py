"""The reward designs: each a pure function from a completion (or a group of them) and its ground truth to a dict of
terms -- the paper's rule reward (``judge``) and the public Think-J code's (``upstream_thinkj``), related work's
presets (``xml_judge``, ``grm``, ``competition``, ``multi_objective``), a trained judge as the reward
(``pairwise_rm``, ``pairwise_group``, over ``judge_http``) and the both-orders consistency term (``twins``).

None registers itself or knows an engine: ``thinkj.rewards.registry`` names them, ``thinkj.rewards.adapters`` hands
them to verl and TRL.
"""
