"""Pure decisions, with no I/O and no clock reads: the policy, retries, escalation, turn records,
and every text a user or a model reads. May import toolkit and below.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""
