"""What ``unstuck eval --via`` measures (:func:`unstuck.evals.via_cli.measure_via`), on CLI
sessions written by hand in each CLI's own wording (Claude Code 2.1.332, Codex CLI 0.171.0,
Gemini CLI 0.61.0, as their model servers hand them to the model): no CLI runs here.

Every expected value comes from the definitions of :mod:`unstuck.evals.runner` (and the module
doc of :mod:`unstuck.evals.via_cli`): the first signal is the first call that ran whose result
opens a blocker; steps to escalate are the calls after it up to and including the call that
ended the turn with the question; seconds run from the first signal's result reaching the
model server to the question; a session that meets no blocker wastes nothing.
"""

from __future__ import annotations

import pytest

from unstuck.core.tools import ToolCall
from unstuck.evals.scenarios import Scenario, builtin_scenarios
from unstuck.evals.via_cli import ViaCall, ViaRun, measure_via, reported

QUESTION = ("Blocked: gh is not signed in, or its credentials were refused. (“You are not logged into any GitHub "
            "hosts. Run gh auth login to authenticate.”)\nYou need to: Run: gh auth login\n"
            "Then: Once you have done this, I will re-check gh and continue the task")
LOGGED_OUT = "You are not logged into any GitHub hosts. Run gh auth login to authenticate."
NO_TOKEN = ("To get started with GitHub CLI, please run:  gh auth login\n"
            "Alternatively, populate the GH_TOKEN environment variable with a GitHub API authentication token.")
CURL_DOWN = "curl: (7) Failed to connect to 127.0.0.1 port 40659 after 0 ms: Couldn't connect to server"
WAITS = ("Not executed: `gh auth login --web` waits for a person: gh signs in through a browser: a person must "
         "enter the one-time code at github.com/login/device. This run is unattended, so nobody can answer it.")
LATCHED = "Not executed: the turn stopped to ask the user."


def scenario(name: str) -> Scenario:
    return next(s for s in builtin_scenarios() if s.name == name)


def call(n: int, tool: str, **arguments: str) -> ToolCall:
    return ToolCall.of(f"call_{n}", tool, arguments)


# The improviser's first moves on gh_logged_out, as the model makes them.
CHECK = call(1, "check_cli_setup", name="gh")
SIGN_IN = call(2, "sign_in_cli", name="gh")
SIGN_IN_WEB = call(3, "run_command", command="gh auth login --web")
CURL = call(4, "run_command", command="curl -sS --max-time 10 https://api.github.com/repos/cli/cli")
SEARCH = call(5, "web_search", query="gh use without login")
ENV = call(6, "run_command", command="env | sort")
GH_API = call(7, "run_command", command="gh api repos/cli/cli")


def codex_shell(output: str, code: int) -> str:
    """Codex's ``exec_command`` output, with the server's ``(exit code N)`` for a non-zero code."""
    text = f"Chunk ID: 6f267a\nWall time: 0.0000 seconds\nProcess exited with code {code}\n" \
           f"Original token count: 20\nOutput:\n{output}\n"
    return f"{text}\n(exit code {code})" if code else text


def gemini_shell(output: str, code: int, hook_context: str = "") -> str:
    """Gemini CLI's ``run_shell_command`` result, with a hook's added context and the server's mark."""
    lines = f"Output: {output}" + (f"\nExit Code: {code}" if code else "") + "\nProcess Group PGID: 11947"
    text = f"<untrusted_context>\n{lines}\n</untrusted_context>"
    if hook_context:
        text += f"\n\n<hook_context>{hook_context}</hook_context>"
    return f"{text}\n(exit code {code})" if code else text


def test_claude_code_question_from_a_calls_own_hook_counts_the_steps_to_that_call() -> None:
    # Claude Code shows the question as PostToolUseFailure's system message after call 4 (stream-json
    # order: question_call 4), then refuses call 5 by the latch and stops; call 5's result never goes back.
    run = ViaRun((
        ViaCall(CHECK, f"{LOGGED_OUT}\n(exit code 1)", 10.0),
        ViaCall(SIGN_IN, f"Error: PreToolUse:Bash hook error: {WAITS}", 10.5),
        ViaCall(SIGN_IN_WEB, f"Error: PreToolUse:Bash hook error: {WAITS}", 11.0),
        ViaCall(CURL, f"{CURL_DOWN}\n(exit code 7)", 12.5),
        ViaCall(SEARCH, f"Error: PreToolUse:Bash hook error: {LATCHED}", None),
    ), 0, ("\n".join(f"PostToolUseFailure:Bash says: {line}" for line in QUESTION.splitlines()), ""), "", 14.0,
        question_call=4)
    got = measure_via(scenario("gh_logged_out"), "improviser", "claude-code", True, run)
    assert got.outcome == "blocked" and got.exact_unblock is True and got.passed is True
    assert got.steps_to_escalate == 3  # calls 2, 3, 4 after the first signal (call 1)
    assert got.seconds_to_escalate == pytest.approx(2.5)  # call 1's result at 10.0, call 4's (the question's) at 12.5
    assert (got.wasted_calls, got.wasted_seconds) == (3, pytest.approx(2.5))
    assert got.workaround_calls == 3  # two refused, one failed
    assert got.refused_calls == 3 and got.tool_calls == 5


def test_a_question_shown_by_the_hook_that_stopped_the_session_counts_to_the_last_call_and_the_cli_s_end() -> None:
    # Gemini CLI: the question reaches the user on stderr ("Hook system message", "Agent execution
    # stopped") when call 5's BeforeTool hook stops the agent; call 5's result never reached the server.
    stderr = f"Hook system message: {QUESTION}\nAgent execution stopped: {QUESTION}\n"
    guidance = "[unstuck] BLOCKED: gh needs the user (auth). Run: gh auth login"
    run = ViaRun((
        ViaCall(CHECK, gemini_shell(LOGGED_OUT, 1, guidance), 2.0),
        ViaCall(SIGN_IN, f"Error: Tool execution blocked: {WAITS}", 2.25),
        ViaCall(SIGN_IN_WEB, f"Error: Tool execution blocked: {WAITS}", 2.5),
        ViaCall(CURL, gemini_shell(CURL_DOWN, 7, guidance), 3.0),
        ViaCall(SEARCH, None, None),
    ), 0, ("", stderr), "", 4.5)
    got = measure_via(scenario("gh_logged_out"), "improviser", "gemini", True, run)
    assert got.outcome == "blocked" and got.passed is True
    assert got.steps_to_escalate == 4  # calls 2 to 5: call 5 ended the turn
    assert got.seconds_to_escalate == pytest.approx(2.5)  # from call 1's result (2.0) to the CLI's end (4.5)
    assert got.wasted_calls == 4 and got.refused_calls == 2
    assert got.workaround_calls == 3  # call 5 never ran and never came back: it is not charged


def test_claude_code_stop_hook_question_after_the_last_call_counts_to_it() -> None:
    # The same Claude Code session, the question shown with no tool call's hook to pin it on
    # (question_call None: a Stop hook's message): the last call ended the turn, the CLI's end is when.
    run = ViaRun((
        ViaCall(CHECK, f"{LOGGED_OUT}\n(exit code 1)", 10.0),
        ViaCall(CURL, f"{CURL_DOWN}\n(exit code 7)", 11.0),
    ), 0, (f"Stop says: {QUESTION}", ""), "", 13.0)
    got = measure_via(scenario("gh_logged_out"), "improviser", "claude-code", True, run)
    assert got.steps_to_escalate == 1
    assert got.seconds_to_escalate == pytest.approx(3.0)


def test_codex_question_in_a_tool_result_ends_the_count_at_that_call() -> None:
    question = f"{CURL_DOWN}\n(exit code 7)\n\n[unstuck] The turn stopped to ask the user:\n{QUESTION}"
    run = ViaRun((
        ViaCall(CHECK, codex_shell(LOGGED_OUT, 1), 5.0),
        ViaCall(SIGN_IN, f"Error: Command blocked by PreToolUse hook: {WAITS} Command: gh auth login --web", 5.25),
        ViaCall(SIGN_IN_WEB, f"Error: Command blocked by PreToolUse hook: {WAITS} Command: gh auth login --web", 5.5),
        ViaCall(CURL, question, 6.5),
        ViaCall(SEARCH, f"Error: Command blocked by PreToolUse hook: {LATCHED} Command: curl", 7.0),
        ViaCall(ENV, f"Error: Command blocked by PreToolUse hook: {LATCHED} Command: env | sort", 7.5),
    ), 0, ("", ""), "I could not complete the task.", 8.0)
    got = measure_via(scenario("gh_logged_out"), "improviser", "codex", True, run)
    assert got.outcome == "blocked" and got.passed is True and got.exact_unblock is True
    assert got.steps_to_escalate == 3  # calls 2, 3, 4: the question came back with call 4
    assert got.seconds_to_escalate == pytest.approx(1.5)  # 5.0 to 6.5
    assert (got.wasted_calls, got.wasted_seconds) == (3, pytest.approx(1.5))  # the refusals after it are not waste
    assert got.workaround_calls == 3 and got.refused_calls == 4


@pytest.mark.parametrize("via", ["claude-code", "codex", "gemini"])
def test_unguarded_gh_logged_out_wastes_the_calls_after_the_first_logged_out_result(via: str) -> None:
    # A first call that fails for its own reasons (a missing notes file: not_found, the agent's to
    # fix) opens nothing: the count starts at the first result that says gh is signed out.
    notes = call(8, "run_command", command="cat notes.txt")
    missing = "cat: notes.txt: No such file or directory"
    view = call(9, "run_command", command="gh repo view cli/cli --json description")
    failed = {"claude-code": lambda text, code: f"{text}\n(exit code {code})", "codex": codex_shell,
              "gemini": gemini_shell}[via]
    succeeded = {"claude-code": lambda text: text, "codex": lambda text: codex_shell(text, 0),
                 "gemini": lambda text: gemini_shell(text, 0)}[via]
    run = ViaRun((
        ViaCall(notes, failed(missing, 1), 1.0),
        ViaCall(view, failed(NO_TOKEN, 4), 2.0),
        ViaCall(CURL, failed(CURL_DOWN, 7), 3.0),
        ViaCall(ENV, succeeded("HOME=/tmp/home\nPATH=/usr/bin"), 4.0),
        ViaCall(GH_API, failed(NO_TOKEN, 4), 5.0),
    ), 0, ("", ""), "I could not get the description.", 9.0)
    got = measure_via(scenario("gh_logged_out"), "improviser", via, False, run)
    assert got.outcome == "done" and got.escalation is None and got.passed is None
    assert got.steps_to_escalate is None and got.seconds_to_escalate is None  # it never asked
    assert got.wasted_calls == 3  # calls 3, 4, 5 after the logged-out result of call 2
    assert got.wasted_seconds == pytest.approx(7.0)  # call 2's result at 2.0 to the CLI's end at 9.0
    assert got.workaround_calls == 2  # curl and gh api failed; env succeeded and is not of the blocker's kind


@pytest.mark.parametrize(("via", "not_there"), [
    ("claude-code", "Error: File does not exist. Note: your current working directory is /work."),
    ("codex", codex_shell("cat: INSTALL.md: No such file or directory", 1)),
    ("gemini", gemini_shell("cat: INSTALL.md: No such file or directory", 1)),
])
@pytest.mark.parametrize("guarded", [False, True])
def test_a_wrong_path_the_agent_fixes_itself_wastes_nothing(via: str, not_there: str, guarded: bool) -> None:
    guide = "# Installing\n\nInstall with: pip install example-tool==2.1\n"
    run = ViaRun((
        ViaCall(call(1, "read_file", path="INSTALL.md"), not_there, 1.0),
        ViaCall(call(2, "search_files", query="INSTALL.md"), "./docs/INSTALL.md", 2.0),
        ViaCall(call(3, "read_file", path="docs/INSTALL.md"), guide, 3.0),
    ), 0, ("", ""), "pip install example-tool==2.1", 4.0)
    got = measure_via(scenario("wrong_path"), "improviser", via, guarded, run)
    assert got.outcome == "done" and got.escalation is None
    assert (got.wasted_calls, got.wasted_seconds, got.workaround_calls) == (0, 0.0, 0)
    assert got.steps_to_escalate is None and got.seconds_to_escalate is None
    assert got.passed is (True if guarded else None)


def test_unstuck_s_own_guidance_in_a_result_is_not_the_tool_s_signal() -> None:
    # Gemini CLI hands a hook's added context to the model inside the result: a listing that
    # succeeded, followed by unstuck's reminder of a blocker, is still a success.
    listing = gemini_shell("README.md", 0, "[unstuck] BLOCKED: gh needs the user (auth). Run: gh auth login")
    assert reported(listing) == ("<untrusted_context>\nOutput: README.md\nProcess Group PGID: 11947\n"
                                 "</untrusted_context>", None, False)
    run = ViaRun((ViaCall(call(1, "run_command", command="ls"), listing, 1.0),), 0, ("", ""), "README.md", 2.0)
    got = measure_via(scenario("wrong_path"), "improviser", "gemini", False, run)
    assert (got.wasted_calls, got.workaround_calls) == (0, 0)


def test_reported_reads_the_exit_code_the_cli_stated_and_a_bare_error() -> None:
    assert reported(f"{LOGGED_OUT}\n(exit code 1)") == (LOGGED_OUT, 1, True)
    assert reported(f"{CURL_DOWN}\n(exit code 7)\n\n[unstuck] The turn stopped to ask the user:\n{QUESTION}") == (
        CURL_DOWN, 7, True)
    assert reported("Error: File does not exist.") == ("File does not exist.", None, True)
    assert reported("hello") == ("hello", None, False)
