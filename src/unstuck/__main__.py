"""``python -m unstuck``: the same as the ``unstuck`` command.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""

from unstuck.cli.app import main

main()
