from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import bare_env, until
from unstuck.core.situations import Kind, Probe
from unstuck.core.tools import Effect
from unstuck.evals.sandbox import Sandbox
from unstuck.recognise.classify import classify_result
from unstuck.toolkit.workspace import KNOWN_CLIS, CliFacts, Workspace, cli_fingerprint, command_subject, standard_tools


def test_run_command_is_about_the_program_its_command_line_runs(tmp_path: Path) -> None:
    # the cases of the subject rule are tests/test_shell.py's (unstuck.commands.parse.command_subject)
    run_command = standard_tools(Workspace(tmp_path))["run_command"]
    assert run_command.subject_of({"command": "cd repo && GH_TOKEN=$(cat t) gh pr create"}) == "gh"
    assert command_subject("sudo -u bob gh auth status") == "gh"


def test_check_cli_setup_declares_auth_with_the_exact_sign_in_for_logged_out_gh(gh_path: str) -> None:
    with Sandbox() as box:
        tools = standard_tools(box.workspace())
        result = tools["check_cli_setup"].invoke({"name": "gh"})
    assert not result.ok
    situation = result.declared
    assert situation is not None
    assert (situation.kind, situation.subject, situation.interactive) == (Kind.AUTH, "gh", True)
    assert situation.unblock == "gh auth login"
    assert situation.probe == Probe.of("check_cli_setup", {"name": "gh"})
    assert json.loads(result.content)["signed_in"] is False


def test_check_cli_setup_declares_not_installed_when_gh_is_off_path() -> None:
    with Sandbox(hide_programs=["gh"]) as box:
        result = standard_tools(box.workspace())["check_cli_setup"].invoke({"name": "gh"})
    assert result.declared is not None
    assert result.declared.kind is Kind.NOT_INSTALLED and result.declared.unblock == "sudo apt-get install -y gh"
    assert result.declared.interactive, "installing with sudo needs a person to authenticate"


def test_check_cli_setup_reports_scopes_for_signed_in_gh_against_the_local_api(gh_path: str) -> None:
    with Sandbox() as box:
        box.sign_in_gh()
        result = standard_tools(box.workspace())["check_cli_setup"].invoke({"name": "gh"})
        requests = box.github.requests if box.github else []
    assert result.ok and result.declared is None, result.content
    report = json.loads(result.content)
    assert report["signed_in"] is True and report["scopes"] == ["read:org", "repo"]
    assert ("GET", "/") in requests


def test_check_cli_setup_declares_permission_for_missing_scopes(gh_path: str) -> None:
    with Sandbox() as box:
        box.serve_github(scopes=("repo",))
        box.sign_in_gh()
        result = standard_tools(box.workspace())["check_cli_setup"].invoke({"name": "gh"})
    assert result.declared is not None and result.declared.kind is Kind.PERMISSION
    assert result.declared.unblock == "gh auth refresh -h github.com -s read:org"


#: A fine-grained personal access token's documented prefix (GitHub docs, "About authentication
#: to GitHub": github_pat_); the API sends no X-OAuth-Scopes for such a token.
FINE_GRAINED = "github_pat_11AAAAAAA0unstuck_fine_grained_token"


def test_check_cli_setup_claims_no_missing_scopes_for_a_fine_grained_token(gh_path: str) -> None:
    # gh lists no scopes for a token type that has none (cli/cli pkg/cmd/auth/status
    # expectScopes; pkg/cmd/auth/shared HeaderHasMinimumScopes gives up on an empty header)
    with Sandbox() as box:
        box.serve_github(token=FINE_GRAINED, scopes=())
        box.sign_in_gh()
        result = standard_tools(box.workspace())["check_cli_setup"].invoke({"name": "gh"})
    assert result.ok and result.declared is None, result.content
    report = json.loads(result.content)
    assert report["signed_in"] is True and "missing_scopes" not in report
    assert "Token scopes" not in report["auth_status"]  # what gh itself printed


def test_a_turn_with_a_fine_grained_token_is_done_not_asked_for_scopes(gh_path: str) -> None:
    from conftest import PlaybackModel
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.turn import TurnStatus, run_turn

    with Sandbox() as box:
        box.serve_github(token=FINE_GRAINED, scopes=())
        box.sign_in_gh()
        model = PlaybackModel([("check_cli_setup", {"name": "gh"}),
                               ("run_command", {"command": "gh repo view cli/cli --json description"}), "done"])
        result = run_turn("describe cli/cli", model=model, tools=standard_tools(box.workspace()), unattended=True,
                          clock=VirtualClock())
    assert result.status is TurnStatus.DONE and result.escalation is None
    assert not any(step.opened for step in result.steps)


def test_signed_in_gh_reads_the_repository_through_the_unix_socket(gh_path: str) -> None:
    with Sandbox() as box:
        box.sign_in_gh()
        result = standard_tools(box.workspace())["run_command"].invoke(
            {"command": "gh repo view cli/cli --json description"})
    assert result.ok, result.content
    assert json.loads(result.content) == {"description": "GitHub's official command line tool"}


def test_bad_token_gets_githubs_401_bad_credentials(gh_path: str) -> None:
    with Sandbox() as box:
        box.sign_in_gh(token="gho_wrong")
        tools = standard_tools(box.workspace())
        result = tools["run_command"].invoke({"command": "gh api user"})
        situation = classify_result(tools["run_command"], {"command": "gh api user"}, result)
    assert not result.ok and "Bad credentials" in result.content
    assert situation is not None and situation.kind is Kind.AUTH and situation.subject == "gh"


def test_run_command_reports_the_real_command_not_found() -> None:
    with Sandbox(hide_programs=["gh"]) as box:
        result = standard_tools(box.workspace())["run_command"].invoke({"command": "gh --version"})
    assert result.exit_code == 127 and "gh: command not found" in result.content


def test_outside_connections_are_refused_on_loopback() -> None:
    with Sandbox() as box:
        result = standard_tools(box.workspace())["run_command"].invoke(
            {"command": "curl -sS --max-time 5 https://api.github.com/"})
        proxy = box.proxy_url
    assert not result.ok and "127.0.0.1" in proxy
    assert "Failed to connect to 127.0.0.1" in result.content or "Connection refused" in result.content


def test_run_command_timeout_kills_the_process_group_and_keeps_the_output(tmp_path: Path) -> None:
    marker = tmp_path / "child-survived"
    workspace = Workspace(tmp_path)
    started = time.monotonic()
    command = f"echo 'Enter the one-time code: WXYZ-9876'; (sleep 3; touch {marker}) & sleep 30"
    result = standard_tools(workspace)["run_command"].invoke({"command": command, "timeout_s": 0.5})
    assert result.exit_code == 124 and time.monotonic() - started < 10
    assert "WXYZ-9876" in result.content and "timed out after 0.5 s: killed process group" in result.content
    situation = classify_result("run_command", {}, result)
    assert situation is not None and situation.kind is Kind.AUTH and situation.interactive
    # the only process that could touch the marker is the backgrounded subshell (a fork of the
    # shell: its command line names the marker); none is left, so none ever will (no 3.5 s wait)
    assert until(lambda: not _running_with(str(marker)), 3.0), "a grandchild of the timed-out command survived"
    assert not marker.exists()


def _running_with(word: str) -> list[int]:
    """The live processes (zombies left out) whose command line holds ``word`` (psutil)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and word in " ".join(proc.info["cmdline"] or ()):
            found.append(proc.pid)
    return found


def test_a_silent_command_that_times_out_is_a_timeout(tmp_path: Path) -> None:
    result = standard_tools(Workspace(tmp_path))["run_command"].invoke({"command": "sleep 30", "timeout_s": 0.3})
    situation = classify_result("run_command", {}, result)
    assert situation is not None and situation.kind is Kind.TIMEOUT


def test_read_file_errors_are_real_exceptions(tmp_path: Path) -> None:
    tools = standard_tools(Workspace(tmp_path))
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    missing = tools["read_file"].invoke({"path": "nope.md"})
    garbled = tools["read_file"].invoke({"path": "latin1.txt"})
    assert missing.error_type == "FileNotFoundError" and garbled.error_type == "UnicodeDecodeError"


def test_search_files_finds_by_path_and_empty_search_is_empty(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "INSTALL.md").write_text("x")
    tools = standard_tools(Workspace(tmp_path))
    assert tools["search_files"]("install") == ["docs/INSTALL.md"]
    empty = tools["search_files"].invoke({"query": "nothing-like-this"})
    situation = classify_result(tools["search_files"], {"query": "x"}, empty)
    assert situation is not None and situation.kind is Kind.EMPTY


def test_sign_in_cli_is_interactive_and_a_write() -> None:
    spec = standard_tools(Workspace(Path("/")))["sign_in_cli"]
    assert spec.interactive and spec.effect.value == "write" and spec.subject_of({"name": "gh"}) == "gh"


def test_a_command_that_leaves_a_background_job_returns_when_it_exits(tmp_path: Path) -> None:
    started = time.monotonic()
    result = standard_tools(Workspace(tmp_path))["run_command"].invoke(
        {"command": "sleep 30 & echo $! > job.pid; echo started; exit 0", "timeout_s": 10})
    assert result.ok and result.exit_code == 0 and "started" in result.content
    assert time.monotonic() - started < 5
    os.kill(int((tmp_path / "job.pid").read_text()), signal.SIGKILL)


def test_timeout_bounds_wall_time_even_when_a_process_leaves_the_group(tmp_path: Path) -> None:
    started = time.monotonic()
    result = standard_tools(Workspace(tmp_path))["run_command"].invoke(
        {"command": "setsid sleep 40 & echo $! > job.pid; sleep 60", "timeout_s": 1})
    assert result.exit_code == 124 and time.monotonic() - started < 6
    os.kill(int((tmp_path / "job.pid").read_text()), signal.SIGKILL)


def test_standard_tool_names_list_the_toolset_in_order(tmp_path: Path) -> None:
    from unstuck.toolkit.workspace import STANDARD_TOOL_NAMES

    assert tuple(standard_tools(Workspace(tmp_path))) == STANDARD_TOOL_NAMES


@pytest.mark.parametrize(
    ("network", "fault", "kind", "evidence"),
    [
        ("refused", None, Kind.UNAVAILABLE, "connect: connection refused"),
        ("ok", "rate_limited", Kind.QUOTA, "API rate limit exceeded"),
    ],
)
def test_check_cli_setup_declares_what_waiting_may_fix_not_a_sign_in(
    gh_path: str, network: str, fault: str | None, kind: Kind, evidence: str
) -> None:
    # gh 2.23's `auth status` says "authentication failed" when it cannot connect at all
    with Sandbox(network=network) as box:
        box.serve_github(fault=fault)
        box.sign_in_gh()
        result = standard_tools(box.workspace())["check_cli_setup"].invoke({"name": "gh"})
    assert result.declared is not None
    assert (result.declared.kind, result.declared.retryable, result.declared.unblock) == (kind, True, None)
    assert evidence in result.declared.detail


def test_without_network_gh_cannot_even_look_the_api_up(gh_path: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("unshare --net needs root")
    with Sandbox(network="none") as box:
        box.sign_in_gh()
        result = standard_tools(box.workspace())["run_command"].invoke({"command": "gh repo view cli/cli"})
    assert "error connecting to api.github.com" in result.content
    situation = classify_result("run_command", {"command": "gh repo view cli/cli"}, result)
    assert situation is not None and situation.kind is Kind.NETWORK


def test_the_local_api_answers_502_once_then_works(gh_path: str) -> None:
    with Sandbox() as box:
        box.serve_github(fault="bad_gateway_once")
        box.sign_in_gh()
        tools = standard_tools(box.workspace())
        first = tools["run_command"].invoke({"command": "gh repo view cli/cli --json description"})
        second = tools["run_command"].invoke({"command": "gh repo view cli/cli --json description"})
    assert not first.ok and "HTTP 502" in first.content
    assert second.ok and "GitHub's official command line tool" in second.content


# --- issue 10: interactive calls through a generic shell tool, the tool's own setup probe -----


def _guarded(box: Sandbox, calls: list[tuple[str, dict[str, object]]]) -> tuple[object, object]:
    from conftest import PlaybackModel
    from unstuck.core.clock import VirtualClock
    from unstuck.loop.turn import run_turn
    from unstuck.store.events import EventLog

    model = PlaybackModel(list(calls))
    log = EventLog()
    result = run_turn("list the open pull requests of cli/cli", model=model, tools=standard_tools(box.workspace()),
                      unattended=True, clock=VirtualClock(), events=log)
    return result, log


def test_gh_auth_login_through_run_command_is_refused_before_it_runs_when_unattended(gh_path: str) -> None:
    with Sandbox() as box:
        result, log = _guarded(box, [("run_command", {"command": "gh auth login --web"})])
    steps = result.steps  # type: ignore[attr-defined]
    assert steps[0].dispatched is False, "the sign-in must never start when nobody can approve it"
    assert steps[0].situation.kind is Kind.PERMISSION and steps[0].situation.interactive
    assert "gh auth login --web" in steps[0].content and "waits for a person" in steps[0].content
    assert not log.named("tool.called")  # type: ignore[attr-defined]


def test_gh_auth_login_with_a_token_on_stdin_is_not_refused(gh_path: str) -> None:
    with Sandbox() as box:
        result, _ = _guarded(box, [("run_command", {"command": "echo bad | gh auth login --with-token"})])
    assert result.steps[0].dispatched is True  # type: ignore[attr-defined]


def test_logged_out_gh_through_run_command_asks_with_gh_auth_login_without_a_setup_call(gh_path: str) -> None:
    calls = [("run_command", {"command": "gh pr list -R cli/cli"}),
             ("run_command", {"command": "curl -s https://api.github.com/repos/cli/cli/pulls"}),
             ("run_command", {"command": "env | grep -i token"}),
             ("run_command", {"command": "cat ~/.config/gh/hosts.yml"})]
    with Sandbox() as box:
        result, log = _guarded(box, calls)
    assert result.status.value == "blocked"  # type: ignore[attr-defined]
    escalation = result.escalation  # type: ignore[attr-defined]
    assert escalation.subject == "gh" and escalation.kind is Kind.AUTH
    assert escalation.unblock == "gh auth login", "the setup probe's declared unblock, not a guess"
    assert "Run: gh auth login" in escalation.text
    model_calls = [s.call.tool for s in result.steps if not s.probe]  # type: ignore[attr-defined]
    assert "check_cli_setup" not in model_calls, "the model never called a setup tool"
    assert [s.call.tool for s in result.steps if s.probe] == ["check_cli_setup"]  # type: ignore[attr-defined]
    assert log.named("probe.setup")  # type: ignore[attr-defined]


# --- issue 11: a pager or prompt waiting at the deadline; the CLI tools answer alike; asking the user ----

#: What the git and CLI stand-ins below run with, over a bare environment (conftest.bare_env).
PLAIN = {"LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1"}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository of 200 commits (one git fast-import, git-fast-import(1))."""
    root = tmp_path_factory.mktemp("history")
    env = bare_env(home=root, **PLAIN)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root / "repo")], check=True, env=env)
    stream = []
    for n in range(1, 201):
        message = f"commit number {n}\n"
        parent = f"from :{n - 1}\n" if n > 1 else ""
        stream.append(f"commit refs/heads/main\nmark :{n}\ncommitter T <t@example.com> {1_700_000_000 + n} +0000\n"
                      f"data {len(message)}\n{message}{parent}\n")
    subprocess.run(["git", "fast-import", "--quiet"], input="".join(stream), text=True, check=True,
                   cwd=root / "repo", env=env)
    return root / "repo"


def pty_workspace(root: Path, **env: str) -> Workspace:
    return Workspace(root, bare_env(home=root, **{**PLAIN, "TERM": "xterm", **env}), grace_s=0.5, terminal=True)


def test_pager_waiting_at_deadline_is_interactive_not_transient(repo: Path) -> None:
    tools = standard_tools(pty_workspace(repo, GIT_PAGER="less"))
    args = {"command": "git log", "timeout_s": 1.5}
    result = tools["run_command"].invoke(args)
    assert result.exit_code == 124 and result.waiting_for_input == "less"
    assert "less was waiting for input at the deadline" in result.content
    situation = classify_result(tools["run_command"], args, result)
    assert situation is not None
    assert (situation.kind, situation.interactive, situation.retryable, situation.subject) == (
        Kind.INVALID_ARGS, True, False, "git")  # the signal table's pager row: interactive invalid_args
    assert situation.detail.startswith("less waited for input at the deadline")
    assert "GIT_PAGER=cat git log" in situation.detail and "git(1)" in situation.detail  # git(1): GIT_PAGER=cat
    assert situation.unblock is None and situation.probe is None  # inferred


def test_the_same_log_without_a_pager_finishes_on_the_terminal(repo: Path) -> None:
    tools = standard_tools(pty_workspace(repo, GIT_PAGER="less"))
    result = tools["run_command"].invoke({"command": "GIT_PAGER=cat git log", "timeout_s": 20})
    assert result.ok and result.waiting_for_input is None
    assert result.content.count("Author: T <t@example.com>") == 200 and "\x1b" not in result.content


def test_a_yes_no_prompt_on_the_terminal_is_interactive_with_no_stdin_as_the_fix(tmp_path: Path) -> None:
    tools = standard_tools(pty_workspace(tmp_path))
    command = """python3 -c 'input("Continue? [y/N] ")'"""
    result = tools["run_command"].invoke({"command": command, "timeout_s": 1.0})
    situation = classify_result(tools["run_command"], {"command": command}, result)
    assert result.waiting_for_input == "python3" and "Continue? [y/N]" in result.content
    assert situation is not None and situation.interactive and not situation.retryable
    assert situation.kind is Kind.INVALID_ARGS and situation.subject == "python3"
    assert f"{command} < /dev/null" in situation.detail
    fixed = tools["run_command"].invoke({"command": f"{command} < /dev/null", "timeout_s": 10})
    assert fixed.waiting_for_input is None and fixed.exit_code != 124  # EOFError at once, no wait


def test_a_slow_command_on_the_terminal_is_still_a_plain_timeout(tmp_path: Path) -> None:
    tools = standard_tools(pty_workspace(tmp_path))
    result = tools["run_command"].invoke({"command": "sleep 5", "timeout_s": 1.0})
    situation = classify_result(tools["run_command"], {"command": "sleep 5"}, result)
    assert result.exit_code == 124 and result.waiting_for_input is None
    assert situation is not None and situation.kind is Kind.TIMEOUT and situation.retryable


def test_run_command_on_a_terminal_workspace_says_it_has_a_terminal(tmp_path: Path) -> None:
    assert standard_tools(pty_workspace(tmp_path))["run_command"].terminal
    assert not standard_tools(Workspace(tmp_path))["run_command"].terminal
    with pytest.raises(ValueError, match="exclude each other"):
        Workspace(tmp_path, stdin_tty=True, terminal=True)


VERSION_SCRIPT = "#!/bin/sh\necho 'mytool 2.1.0'\n"


def cli_setup(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A tool's source script, an empty bin directory on PATH, and the environment."""
    source = tmp_path / "dist" / "mytool"
    source.parent.mkdir()
    source.write_text(VERSION_SCRIPT)
    source.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    return source, bin_dir, bare_env(home=home, PATH=f"{bin_dir}:/usr/bin:/bin", **PLAIN)


def mytool_facts(source: Path, bin_dir: Path, *, sudo: bool = False) -> dict[str, CliFacts]:
    # install(1) (GNU coreutils): copy with mode 755; needs no network and no root
    command = f"install -m 755 {shlex.quote(str(source))} {shlex.quote(str(bin_dir / 'mytool'))}"
    return {"mytool": CliFacts("mytool", "mytool", install=f"sudo {command}" if sudo else command,
                               install_source="this test")}


def test_install_cli_unattended_declares_not_installed_with_the_command_and_never_runs_it(tmp_path: Path) -> None:
    source, bin_dir, env = cli_setup(tmp_path)
    facts = mytool_facts(source, bin_dir)
    result = standard_tools(Workspace(tmp_path, env), clis=facts)["install_cli"].invoke({"name": "mytool"})
    assert not result.ok and result.declared is not None
    assert (result.declared.kind, result.declared.subject, result.declared.unblock) == (
        Kind.NOT_INSTALLED, "mytool", facts["mytool"].install)
    assert not result.declared.interactive  # no sudo, no licence: the agent's user can run it as is
    assert result.declared.probe == Probe.of("check_cli_setup", {"name": "mytool"})
    assert not (bin_dir / "mytool").exists() and json.loads(result.content)["ran"] is False


def test_install_cli_that_needs_sudo_declares_it_interactive(tmp_path: Path) -> None:
    source, bin_dir, env = cli_setup(tmp_path)
    facts = mytool_facts(source, bin_dir, sudo=True)
    result = standard_tools(Workspace(tmp_path, env), clis=facts)["install_cli"].invoke({"name": "mytool"})
    assert result.declared is not None and result.declared.interactive
    assert result.declared.unblock == facts["mytool"].install and not (bin_dir / "mytool").exists()


def test_install_cli_attended_installs_after_the_user_confirms_and_then_reports_ok(tmp_path: Path) -> None:
    source, bin_dir, env = cli_setup(tmp_path)
    facts = mytool_facts(source, bin_dir)
    asked: list[str] = []

    def confirm(question: str) -> bool:
        asked.append(question)
        return True

    result = standard_tools(Workspace(tmp_path, env, confirm=confirm), clis=facts)["install_cli"].invoke(
        {"name": "mytool"})
    assert asked == [f"Install mytool with: {facts['mytool'].install}?"]
    assert result.ok and result.declared is None, result.content
    report = json.loads(result.content)
    assert report["path"] == str(bin_dir / "mytool") and report["version"] == "mytool 2.1.0"
    assert report["ran"] is True and report["install"]["exit_code"] == 0


def test_install_cli_attended_and_declined_declares_not_installed_and_runs_nothing(tmp_path: Path) -> None:
    source, bin_dir, env = cli_setup(tmp_path)
    facts = mytool_facts(source, bin_dir)
    result = standard_tools(Workspace(tmp_path, env, confirm=lambda question: False), clis=facts)[
        "install_cli"].invoke({"name": "mytool"})
    assert result.declared is not None and result.declared.kind is Kind.NOT_INSTALLED
    assert "declined" in result.declared.detail and result.declared.unblock == facts["mytool"].install
    assert not (bin_dir / "mytool").exists()


def test_install_cli_on_path_already_says_where_and_which_version(tmp_path: Path) -> None:
    source, bin_dir, env = cli_setup(tmp_path)
    (bin_dir / "mytool").write_text(VERSION_SCRIPT)
    (bin_dir / "mytool").chmod(0o755)

    def confirm(question: str) -> bool:
        raise AssertionError(f"nothing to install, yet asked: {question}")

    result = standard_tools(Workspace(tmp_path, env, confirm=confirm), clis=mytool_facts(source, bin_dir))[
        "install_cli"].invoke({"name": "mytool"})
    report = json.loads(result.content)
    assert result.ok and report["path"] == str(bin_dir / "mytool") and report["version"] == "mytool 2.1.0"


@pytest.mark.parametrize("tool_name", ["install_cli", "check_cli_setup", "sign_in_cli"])
def test_a_cli_on_disk_outside_path_is_declared_with_the_path_to_add(tmp_path: Path, tool_name: str) -> None:
    _, _, env = cli_setup(tmp_path)
    local = Path(env["HOME"]) / ".local" / "bin"
    local.mkdir(parents=True)
    (local / "mytool").write_text(VERSION_SCRIPT)
    (local / "mytool").chmod(0o755)
    facts = {"mytool": CliFacts("mytool", "mytool", install="true", sign_in="mytool login")}

    def confirm(question: str) -> bool:
        raise AssertionError(f"it is on disk already, yet asked: {question}")

    result = standard_tools(Workspace(tmp_path, env, confirm=confirm), clis=facts)[tool_name].invoke(
        {"name": "mytool"})
    declared = result.declared
    assert declared is not None and declared.kind is Kind.NOT_INSTALLED and not declared.interactive
    assert declared.detail == f"mytool is installed at {local / 'mytool'} but not on PATH"
    assert declared.unblock == f'export PATH="{local}:$PATH"' and declared.location == str(local / "mytool")
    assert json.loads(result.content)["status"] == "error"


FAKE_CLI = """#!/bin/sh
# a CLI whose sign-in state is a file: `status` exits 0 only when signed in (as gh auth status)
state="$HOME/.fakecli-signed-in"
case "$1" in
  --version) echo "fakecli 0.9";;
  status) if [ -f "$state" ]; then echo "Logged in"; else echo "You are not logged in" >&2; exit 1; fi;;
  login) echo "First copy your one-time code: ABCD-1234"; [ -n "$FAKECLI_APPROVES" ] && touch "$state"; exit 0;;
esac
"""


def fake_cli(tmp_path: Path, **extra: str) -> tuple[Workspace, dict[str, CliFacts]]:
    _, bin_dir, env = cli_setup(tmp_path)
    (bin_dir / "fakecli").write_text(FAKE_CLI)
    (bin_dir / "fakecli").chmod(0o755)
    facts = {"fakecli": CliFacts("fakecli", "the fake CLI", auth_status_args=("status",), sign_in="fakecli login")}
    return Workspace(tmp_path, {**env, **extra}), facts


def test_sign_in_cli_that_was_not_approved_declares_auth_with_the_sign_in_and_keeps_the_code(tmp_path: Path) -> None:
    workspace, facts = fake_cli(tmp_path)
    result = standard_tools(workspace, clis=facts)["sign_in_cli"].invoke({"name": "fakecli"})
    declared = result.declared
    assert declared is not None and (declared.kind, declared.interactive, declared.unblock) == (
        Kind.AUTH, True, "fakecli login")
    report = json.loads(result.content)
    assert report["status"] == "error" and "ABCD-1234" in report["sign_in"]["output"]


def test_sign_in_cli_that_was_approved_reports_the_cli_signed_in(tmp_path: Path) -> None:
    workspace, facts = fake_cli(tmp_path, FAKECLI_APPROVES="1")
    result = standard_tools(workspace, clis=facts)["sign_in_cli"].invoke({"name": "fakecli"})
    assert result.ok and result.declared is None
    assert json.loads(result.content)["signed_in"] is True


def test_sign_in_cli_for_a_cli_that_is_not_installed_declares_not_installed() -> None:
    with Sandbox(hide_programs=["gh"]) as box:
        result = standard_tools(box.workspace())["sign_in_cli"].invoke({"name": "gh"})
    assert result.declared is not None and result.declared.kind is Kind.NOT_INSTALLED
    assert result.declared.unblock == KNOWN_CLIS["gh"].install


def test_request_user_input_returns_the_answer_of_the_person_attending(tmp_path: Path) -> None:
    asked: list[str] = []

    def ask(question: str) -> str:
        asked.append(question)
        return "the staging cluster"

    spec = standard_tools(Workspace(tmp_path, ask=ask))["request_user_input"]
    result = spec.invoke({"question": "Which cluster?\x1b[2J"})
    assert spec.interactive and spec.effect is Effect.READ
    assert result.ok and result.content == "the staging cluster" and asked == ["Which cluster?"]


def test_request_user_input_with_nobody_attending_declares_an_interactive_permission(tmp_path: Path) -> None:
    result = standard_tools(Workspace(tmp_path))["request_user_input"].invoke({"question": "Which cluster?"})
    assert not result.ok and result.declared is not None
    assert (result.declared.kind, result.declared.interactive) == (Kind.PERMISSION, True)
    assert "nobody is attending" in result.declared.detail


def _stand_in_gh(tmp_path: Path) -> Path:
    """A program named gh that prints gh's --version line (cli/cli: "gh version X (date)")."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text("#!/bin/sh\necho 'gh version 2.23.0 (2023-02-14)'\n")
    gh.chmod(0o755)
    return bin_dir


def test_the_fingerprint_of_gh_names_the_github_host_it_talks_to(tmp_path: Path) -> None:
    bin_dir = _stand_in_gh(tmp_path)
    path = f"{bin_dir}:/usr/bin:/bin"
    default = cli_fingerprint(Workspace(tmp_path, env=bare_env(PATH=path)), "gh")
    enterprise = cli_fingerprint(Workspace(tmp_path, env=bare_env(PATH=path, GH_HOST="ghe.example.com")), "gh")
    # gh help environment: GH_HOST names the GitHub host; github.com when unset
    assert default == f"{bin_dir / 'gh'}|gh version 2.23.0 (2023-02-14)|host=github.com"
    assert enterprise == f"{bin_dir / 'gh'}|gh version 2.23.0 (2023-02-14)|host=ghe.example.com"


def test_a_cli_without_a_service_host_is_fingerprinted_by_path_and_version_alone(tmp_path: Path) -> None:
    bin_dir = _stand_in_gh(tmp_path)
    (bin_dir / "gh").rename(bin_dir / "tool")
    found = cli_fingerprint(Workspace(tmp_path, env=bare_env(PATH=f"{bin_dir}:/usr/bin:/bin", GH_HOST="x")), "tool")
    assert found == f"{bin_dir / 'tool'}|gh version 2.23.0 (2023-02-14)"
    assert cli_fingerprint(Workspace(tmp_path, env=bare_env(PATH=str(bin_dir))), "absent") == "absent: not on PATH"
