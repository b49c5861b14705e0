"""Test files that must not run beside each other under pytest-xdist (``make test``: two workers). Each group is one
unit of work, run on one worker file after file; every other file is a unit of its own (tests/conftest.py's
scheduler, which also puts the engine group first).

- ``engines``: files that start verl or a Ray cluster (a verl run peaks near 10 GB; Ray's and slurmctld's processes
  are machine-wide).
- ``vllm``: files that start a vLLM engine on the CPU (its KV cache, and threads bound over every core).
"""

ENGINES = "engines"
GROUPS = {
    ENGINES: ("test_reproduce_cpu.py", "test_verl_cpu_twins.py", "test_verl_cpu_validation.py", "test_verl_cpu_train.py",
              "test_pairwise_reward_http.py", "test_verl_reward_presets.py", "test_online_verl.py",
              "test_ray_two_node.py", "test_slurm.py", "test_judge_as_reward_slow.py", "test_gpu_device_rehearsal.py"),
    "vllm": ("test_data_http_vllm.py", "test_evaluation_vllm.py", "test_vllm_backend.py"),
}
GROUP_OF = {name: group for group, names in GROUPS.items() for name in names}


def unit_of(nodeid: str) -> str:
    """The unit of work of a test id: its file's group, else its file."""
    path = nodeid.split("::", 1)[0]
    return GROUP_OF.get(path.rsplit("/", 1)[-1], path)
