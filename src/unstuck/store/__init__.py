"""What is kept and observed: the journal, lessons, the SQL engines and store URLs, events,
OpenTelemetry, diagnostics, the second opinion's cache, the cost report. May import decide and
below.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""
