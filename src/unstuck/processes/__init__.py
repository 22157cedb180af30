"""Running tool processes: leases with deadlines, capture, containment, cgroups, the supervisor of
a killed run, file locks. May import recognise, commands and core.
"""
