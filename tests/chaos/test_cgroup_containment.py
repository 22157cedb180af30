"""Chaos: a daemon that double-forks and clears its environment (no parent, no session, no
lease token) under a turn whose parent then dies. Only the lease's cgroup still holds it
(unstuck.processes.cgroups); the signal drain and the supervisor end it through the cgroup, and the
cgroup is gone after. Skipped, with the reason, where no cgroup v2 hierarchy is writable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from conftest import bare_env, until
from unstuck.processes import cgroups
from unstuck.processes.members import token_prefix

pytestmark = pytest.mark.skipif(cgroups.delegation_root() is None,
                                reason="no writable cgroup v2 hierarchy here (none mounted, read-only, or not "
                                       "delegated to this user)")

#: The parent: ``unstuck run``'s containment, then a lease whose command starts the daemon and waits.
PARENT = """
import json
import sys
from pathlib import Path
from unstuck.processes import containment, leases
containment.install_containment()
daemon = "(env -i setsid /bin/bash -c 'exec -a %s sleep 3600' &) ; sleep 3600" % sys.argv[1]
leases.run_leased(["/bin/bash", "-c", daemon], cwd=Path(sys.argv[2]), env=json.loads(sys.argv[3]), deadline_s=600)
"""
SETTLE_S = 5.0


def _named(marker: str) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [None])[0] == marker]


@pytest.fixture
def marker() -> Iterator[str]:
    name = f"unstuck-chaos-daemon-{uuid.uuid4().hex[:12]}"
    yield name
    for pid in _named(name):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_daemon_hiding_from_every_search_dies_with_its_turn(tmp_path: Path, marker: str, signum: int) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, marker, str(tmp_path), json.dumps(bare_env())], start_new_session=True)
    try:
        assert until(lambda: bool(_named(marker)), 10), "the daemon started"
        (daemon,) = _named(marker)
        assert "UNSTUCK_LEASE" not in psutil.Process(daemon).environ(), "it carries no token"
        assert psutil.Process(daemon).ppid() != parent.pid
        held = cgroups.lease_cgroups([token_prefix(parent.pid)])
        assert len(held) == 1 and daemon in held[0].members(), "the cgroup is what still holds it"
        os.kill(parent.pid, signum)
        parent.wait(timeout=10)
        assert until(lambda: not _named(marker), SETTLE_S), "the daemon outlived its turn"
        assert until(lambda: not held[0].path.exists(), SETTLE_S), "the turn's cgroup is removed once empty"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
