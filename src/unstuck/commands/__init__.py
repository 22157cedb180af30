"""What a command line does and needs, one module per job: ``parse`` (the tree-sitter parse
and the command-line model), ``catalogue`` (the one engine that reads and matches catalogue
rows), ``interactive`` (the calls that wait for a person), ``credentials`` (credential-changing
calls), ``interpreters`` (the interpreter table), ``screen`` (the screen for suggested
commands), ``programs`` (the screen's table of what programs do), ``plain`` (what a declared
unblock may be), ``installed`` (programs installed off PATH), ``waiting`` (the non-interactive
forms of waiting calls); ``shell`` keeps the earlier import path. May import core.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""
