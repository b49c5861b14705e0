"""A verl ``DataProto`` of judge responses as a reward manager receives them, for reward tests without a rollout.

    from verl_batches import reward_batch   # tests/ is on sys.path in a test module
"""

from __future__ import annotations

from typing import Any

import numpy as np


def reward_batch(tok, texts: list[str], truths: list[Any], extra_infos: list[dict] | None = None,
                 uids: list[str] | None = None):
    """One row per response text under the prompt "question" (right-padded), with ``truths`` as each row's
    ``reward_model.ground_truth``, ``extra_infos`` (default ``{"index": i}``) and ``uids`` (default one group)."""
    import torch
    from verl import DataProto

    rows = [(tok.encode("question"), tok.encode(t)) for t in texts]
    width = max(len(r) for _, r in rows)
    responses = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), len(rows[0][0]) + width), dtype=torch.long)
    for i, (prompt, response) in enumerate(rows):
        responses[i, :len(response)] = torch.tensor(response)
        mask[i, :len(prompt) + len(response)] = 1
    prompts = torch.tensor([p for p, _ in rows])
    extra_infos = extra_infos or [{"index": i} for i in range(len(rows))]
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
                 "attention_mask": mask},
        non_tensors={"data_source": np.array(["thinkj"] * len(rows), dtype=object),
                     "reward_model": np.array([{"style": "rule", "ground_truth": g} for g in truths], dtype=object),
                     "extra_info": np.array(extra_infos, dtype=object),
                     "uid": np.array(uids or ["u"] * len(rows), dtype=object)})
