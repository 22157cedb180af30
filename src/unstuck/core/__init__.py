"""The floor every layer stands on: situations and their words, errors, the clock, text made safe,
secrets masked, reading and writing files and streams, derived data kept between processes, file
trees changed without leaving them. Imports nothing of unstuck's above it.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""
