"""Running tool processes: leases with deadlines, capture, containment, cgroups, the supervisor of
a killed run, file locks, process identity (a pid with its start time). May import recognise,
commands and core.
"""
