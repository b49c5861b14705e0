"""The demo (``make demo`` / ``thinkj smoke``): the whole method on a small model on CPU, in one run directory.

It uses the library the way a user's script would; nothing in ``thinkj`` outside this package imports it except the
tiny-model builder and test helpers that reuse the tiny task.

* ``runner``: the stage list, the plan fields each stage's completion record keeps, the final table (the loop,
  records, logs and progress lines are :mod:`thinkj.stage_runner`'s, shared with the reproduction pipeline);
* ``plans``: every budget (steps, sizes, learning rates) per model, with the measurements behind them;
* ``tasks`` / ``tiny_task`` / ``fact_task``: the judging tasks (``fruit`` for the tiny model, ``facts`` for SmolLM2);
* ``teacher_server``: the scripted R1 stand-in served over HTTP;
* ``stages_*``: setup, data selection, teacher, offline, online, evaluation; ``summary``: ``summary.json``.
"""
