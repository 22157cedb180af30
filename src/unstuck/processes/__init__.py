"""Running tool processes, one module per job: ``leases`` (a command run under a deadline in a
process group of its own), ``capture`` (its output in bounded memory), ``terminal`` (a command on
a pty of its own), ``members`` (which processes are a lease's), ``ending`` (SIGTERM, grace,
SIGKILL, survivors), ``registry`` (the live leases, mirrored to the supervisor), ``containment``
(ending them however this process ends), ``supervisor`` (the process that outlives it),
``cgroups``, ``waits`` (a process waiting on its terminal), ``identity`` (a pid with its start
time), ``filelocks`` (who holds a file lock). May import recognise, commands and core.
Internal: not a supported import path (docs/reference/index.md lists those that are).
"""
