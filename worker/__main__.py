"""``python -m worker``: the same as the ``worker`` console script."""

from worker import main

main()
