"""``python -m unstuck``: the same as the ``unstuck`` command."""

from unstuck.cli.app import main

main()
