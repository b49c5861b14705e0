"""``python -m thinkj.pipeline [--print-env | merge-verl CHECKPOINTS OUT | build-model NAME DIR]``: the run with the
environment's settings over the defaults (:func:`thinkj.pipeline.run.main`)."""

from thinkj.errors import exit_on_user_error
from thinkj.pipeline.run import main

if __name__ == "__main__":
    exit_on_user_error(main)
