"""What a tool result means: the classifier, declarations, the signal table, code tables, message
catalogues, envelopes, and what tool text may become. May import commands and core.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""
