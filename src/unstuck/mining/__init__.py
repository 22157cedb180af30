"""Mining environment-level recovery rules from contrast (seed 003).
Internal: not a supported import path (docs/reference/index.md lists those that are).

Perturb executable environments with observed tool failures (:mod:`unstuck.faults`), let a
capability-diverse pool attempt every task under the same noise, label each rollout by the
environment's verifier and an analyzer independently (a disagreement is discarded), pair an
agreed success with an agreed failure of the same task, and turn recurring bad patterns across
pairs into rules "when P, do A" that name the environment's own tools and objects, kept only
if, as interventions on held-out tasks, they fix more than they break.

Modules: :mod:`~unstuck.mining.environment` (environments, sessions, tasks, snapshots),
:mod:`~unstuck.mining.trace` (rollout traces, bad patterns), :mod:`~unstuck.mining.rules`
(rules and the environment record).
"""
