"""The peer comparison (unstuck.integrations.peers, ``unstuck eval --frameworks``): the reference
behaviours through each framework's own test model on the real gh behind a plain shell tool,
with the framework's defaults and with unstuck."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from unstuck.evals.shell_world import Behaviour
from unstuck.integrations.peers import FRAMEWORKS, PeerRun, peer_ratios, run_peers

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
#: The measurement's cap here (keeps the suite short; the report uses 200).
CAP = 60
#: The rule: a guarded run stops within 3 tool calls after the first signal; the first call
#: (the task's command, answered by the signed-out gh) is that signal.
FIRST_SIGNAL, AFTER_SIGNAL = 1, 3
STOPPERS = ("improviser", "retrier")


@pytest.fixture(scope="module")
def runs() -> list[PeerRun]:
    for name in ("agents", "langchain", "pydantic_ai", "mcp"):
        pytest.importorskip(name)
    return run_peers(list(FRAMEWORKS), ["gh_logged_out"], list(Behaviour), cap=CAP)


def _one(runs: list[PeerRun], framework: str, behaviour: str, guarded: bool) -> PeerRun:
    (run,) = [r for r in runs if (r.framework, r.behaviour, r.guarded) == (framework, behaviour, guarded)]
    assert run.error is None, run.error
    return run


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
@pytest.mark.parametrize("behaviour", STOPPERS)
def test_with_unstuck_the_run_stops_blocked_within_three_calls_and_the_user_gets_gh_auth_login(
        runs: list[PeerRun], framework: str, behaviour: str) -> None:
    run = _one(runs, framework, behaviour, guarded=True)
    assert run.status == "blocked" and run.exact_unblock and not run.capped, run
    assert run.tool_calls - FIRST_SIGNAL <= AFTER_SIGNAL, run


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_with_defaults_the_improviser_runs_to_the_frameworks_own_limit_or_the_cap_without_the_unblock(
        runs: list[PeerRun], framework: str) -> None:
    run = _one(runs, framework, "improviser", guarded=False)
    assert run.status != "blocked" and not run.exact_unblock, run
    if framework == "openai-agents":
        from agents.run import DEFAULT_MAX_TURNS
        # one call a model turn; the turn after max_turns raises before its call
        assert run.stopped_by.startswith("MaxTurnsExceeded") and run.tool_calls >= DEFAULT_MAX_TURNS - 1
    elif framework == "pydantic-ai":
        from pydantic_ai.usage import UsageLimits
        limit = UsageLimits().request_limit
        assert limit is not None and limit < CAP
        assert run.stopped_by.startswith("UsageLimitExceeded") and run.tool_calls == limit
    elif framework == "langgraph":  # the default recursion limit is far above the cap
        assert (run.capped and run.tool_calls == CAP) or run.stopped_by.startswith("GraphRecursionError"), run
    else:  # the MCP SDK has no loop: only the measurement stops it
        assert run.capped and run.tool_calls == CAP and run.status == "running", run


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_unstuck_does_not_make_the_compliant_agent_worse(runs: list[PeerRun], framework: str) -> None:
    plain = _one(runs, framework, "compliant", guarded=False)
    guarded = _one(runs, framework, "compliant", guarded=True)
    assert plain.tool_calls == 1 and plain.exact_unblock  # it asks by itself after the first failure
    assert guarded.tool_calls <= plain.tool_calls and guarded.exact_unblock
    assert guarded.status in ("answered", "blocked") and not guarded.capped  # the user is told, the run ends


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_a_guarded_runs_refused_calls_are_counted_beside_the_calls_that_ran(runs: list[PeerRun],
                                                                             framework: str) -> None:
    """The improviser hunts credentials while gh is signed out (``env | grep -i token``, the
    hosts file): the guard refuses those before they run (DESIGN.md: no token or credential
    tricks), so its refusals are counted apart from the calls that reached the shell; the
    framework's defaults refuse nothing."""
    guarded = _one(runs, framework, "improviser", guarded=True)
    plain = _one(runs, framework, "improviser", guarded=False)
    assert guarded.refused_calls > 0 and plain.refused_calls == 0, (guarded, plain)
    # the same script meets the same guard in every framework: the same refusals
    others = {_one(runs, f, "improviser", guarded=True).refused_calls for f in FRAMEWORKS}
    assert others == {guarded.refused_calls}
    # the retrier repeats the task's own command: the repetition rule stops it, nothing is refused
    assert _one(runs, framework, "retrier", guarded=True).refused_calls == 0
    ratio = next(q for q in peer_ratios(runs) if (q.framework, q.behaviour) == (framework, "improviser"))
    assert ratio.unstuck_refused == guarded.refused_calls and ratio.to_dict()["unstuck_refused"] > 0


def test_the_ratio_is_a_lower_bound_where_the_defaults_were_capped(runs: list[PeerRun]) -> None:
    ratios = {(q.framework, q.behaviour): q for q in peer_ratios(runs)}
    mcp = ratios["mcp", "improviser"]
    assert mcp.at_least and mcp.text.startswith("≥ ") and mcp.ratio == CAP / mcp.unstuck_calls
    agents = ratios["openai-agents", "improviser"]
    assert not agents.at_least and agents.ratio is not None and agents.ratio > 1


def test_a_missing_gh_also_ends_blocked_with_the_install_remedy_in_fewer_calls() -> None:
    pytest.importorskip("agents")
    plain, guarded = run_peers(["openai-agents"], ["gh_missing"], ["improviser"], cap=CAP)
    assert guarded.status == "blocked" and guarded.exact_unblock
    assert not plain.exact_unblock and guarded.tool_calls < plain.tool_calls


def test_unknown_names_are_refused_before_any_run() -> None:
    with pytest.raises(ValueError, match="nope"):
        run_peers(["nope"], ["gh_logged_out"], ["improviser"])


def test_importing_the_peer_comparison_imports_no_framework() -> None:
    code = ("import sys, unstuck.integrations.peers; "
            "print([m for m in ('agents', 'langgraph', 'langchain', 'pydantic_ai', 'mcp') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_cli_runs_the_peer_comparison_and_writes_the_runs(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    pytest.importorskip("pydantic_ai")
    target = tmp_path / "peers.json"
    done = subprocess.run([sys.executable, "-m", "unstuck", "eval", "--frameworks", "openai-agents,pydantic-ai",
                           "--scenarios", "gh_logged_out", "--json", str(target)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    written = json.loads(target.read_text(encoding="utf-8"))
    assert {(r["framework"], r["behaviour"], r["guarded"]) for r in written["runs"]} == {
        (f, b.value, g) for f in ("openai-agents", "pydantic-ai") for b in Behaviour for g in (False, True)}
    assert "tool calls: defaults / unstuck" in done.stdout and "openai-agents" in done.stdout
    assert all(isinstance(r["refused_calls"], int) for r in written["runs"])
    improvisers = [r for r in written["runs"] if r["behaviour"] == "improviser"]
    assert all((r["refused_calls"] > 0) is r["guarded"] for r in improvisers), improvisers
    assert all(q["unstuck_refused"] > 0 for q in written["ratios"] if q["behaviour"] == "improviser")
    header = next(line for line in done.stdout.splitlines() if "tool calls" in line and "refused" in line)
    assert header.index("tool calls") < header.index("refused") < header.index("how it stops")
