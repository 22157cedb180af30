"""The resilience eval: scenarios of real blocker states run by reference agents in sandboxes,
unguarded and guarded, and the tables and reports of what each run did. May import mining,
faults and every folder below them.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""
