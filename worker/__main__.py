"""``python -m worker``: the same as the ``worker`` console script."""

from worker.cli import main

main()
