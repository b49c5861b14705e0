"""The end-to-end reproduction pipeline: one ordered list of shell commands, run with completion records.

    thinkj run configs/recipes/qwen2.5-7b.yaml --dry-run     # print every command, run nothing
    bash scripts/reproduce_qwen2.5-7b.sh                    # run; finished stages are skipped
    W_STR=0.5 SEED=1 bash scripts/reproduce_qwen2.5-32b.sh  # a setting from the environment; runs/<profile>_seed1
    python -m thinkj.pipeline --print-env                   # every setting, its default and why

A run, module by module (run.py imports plan.py, which imports the phases; all of them build on stage.py,
checks.py and settings.py):

    settings.py      every setting declared once (type, default, why); a recipe < the environment < --set
                     (resolve), a misspelt name refused ("did you mean ...?")
    plan.py          the stage list (paper §3): validate() checks every setting before stage 1, plan() lays
                     out the phases and gives each stage the settings its output depends on
      prep.py          what a run prepares for itself: a model built in the run folder, a generated task,
                       the scripted teacher (the CPU recipes)
      (plan.py)        the data stages: load -> difficulty -> dedup -> decontaminate (no pair holding an
                       item of BENCHMARKS) -> traces -> clip -> seed_set (LIMJ707)
      learn.py         judge SFT -> offline (critic SFT, critic-guided DPO) and / or online RL (verl or TRL)
      evaluate.py      each benchmark judged by the final model or by each EVAL_ROWS row, then compare
      (plan.py)        tables
    stage.py         one Stage (command, output, settings, inputs) and the pieces every phase builds it from
    checks.py        the value checks the phases share (one of, positive, finite, override lists, BENCHMARK_DATA)
    run.py           run_pipeline / run_recipe (`thinkj run`) / main (`python -m thinkj.pipeline`, __main__.py):
                     hands the stages to the loop, serves the scripted teacher, writes the stage times
    stage_runner.py  the loop: a stage is done only by its completion record <stage folder>/<stage>.done.json
                     (settings, the sha256 of every local input, command, counts), written last by temp file +
                     rename; a record made with other settings or on changed input stops the run naming the
                     difference; logs in <RUN_DIR>/logs/<stage>.log (an online run's own stages:
                     <RUN_DIR>/logs/<online folder>/<stage>.log)

The reward preset, algorithm and weight overrides name the online run's folder (``W_STR=0.0`` is a new run beside
the default one). ``SEED`` reaches every seeded stage and sits in their records; unset, each stage keeps its own
default seed (``plan.STAGE_SEEDS``). The engines resume inside an unfinished stage (cached generations, verl /
LlamaFactory checkpoints). See docs/runs.md and docs/reproduction.md.
"""
