"""``python -m unstuck``: the same as the ``unstuck`` command."""

from unstuck.cli import main

main()
