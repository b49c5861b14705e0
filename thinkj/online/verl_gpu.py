"""The settings of a verl GPU run that depend on what the node has installed: the attention implementation.

verl 0.9.1 loads the actor, the reference and the critic with ``attn_implementation="flash_attention_2"`` unless
``model.override_config.attn_implementation`` says otherwise (``verl/workers/config/model.py``). flash-attn has no
wheel on PyPI and is a separate install step (``INSTALL_FLASH_ATTN=1 bash scripts/setup_gpu_env.sh``), so a node
without it would fail inside the job, minutes after launch. The launcher therefore always names the
implementation: ``flash_attention_2`` where ``flash_attn`` imports here, else PyTorch's ``sdpa``, and says which.

verl's ``use_remove_padding`` (on by default) still works with ``sdpa``: its unpadding falls back to plain torch
without flash-attn (``verl/utils/attention_utils.py``), and transformers turns the packed sequences' position ids
into a block-diagonal mask for ``sdpa`` (``masking_utils.find_packed_sequence_indices``; only without a KV cache,
and verl's forward passes ``use_cache=False``), which tests/test_verl_gpu_config.py checks on a tiny model.
"""

from __future__ import annotations

import importlib

FLASH, SDPA = "flash_attention_2", "sdpa"
# the model sections verl builds with HFModelConfig; the critic's only where the algorithm has one
MODEL_KEYS = ("actor_rollout_ref.model", "critic.model")


def attention_choice() -> tuple[str, str]:
    """``(implementation, why)``: flash_attention_2 when ``flash_attn`` imports in this Python, else sdpa."""
    try:
        importlib.import_module("flash_attn")
    except Exception as err:  # not installed, or built against another torch (an ImportError / OSError at import)
        return SDPA, (f"flash_attn does not import here ({type(err).__name__}: {' '.join(str(err).split())[:120]}); "
                      "for flash_attention_2: INSTALL_FLASH_ATTN=1 bash scripts/setup_gpu_env.sh")
    return FLASH, "flash_attn imports here"


def attention_overrides(implementation: str, *, critic: bool, user_overrides: list[str]) -> list[str]:
    """Hydra overrides naming ``implementation`` for each model verl loads; a model whose attention the user's own
    overrides already name is left to them (two ``+key=`` for one key is a Hydra error)."""
    keys = MODEL_KEYS if critic else MODEL_KEYS[:1]
    named = {o.lstrip("+~").split("=", 1)[0] for o in user_overrides}
    return [f"+{key}.override_config.attn_implementation={implementation}" for key in keys
            if f"{key}.override_config.attn_implementation" not in named]
