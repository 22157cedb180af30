"""A scenario file is a program (issue 23, deliver 5): ``unstuck eval FILE`` and ``unstuck run FILE``
show a user's file's commands and ask before running one not seen before; without a terminal
they refuse and never wait; ``--trust``, a listed digest or a "yes" runs it; bundled scenarios
run as before; a user's file runs as the sandbox's account with no network where the machine
allows. Every process gets a temporary HOME and XDG_CONFIG_HOME: the user's real config folder
is never read or written."""

from __future__ import annotations

import hashlib
import os
import pwd
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from unstuck.core.text import clean_terminal_text
from unstuck.evals.runner import run_scenario
from unstuck.evals.scenarios import builtin_scenarios, load_scenario
from unstuck.evals.trust import (
    CONFINED_ACCOUNT,
    DIGESTS_FILE_NAME,
    TRUSTED_DIGESTS_ENV,
    RunsCommand,
    TrustError,
    confinement,
    read_digests,
    scenario_commands,
    scenario_text,
    shown_commands,
    trusted_digests,
    untrusted,
)

UNSTUCK = [sys.executable, "-m", "unstuck"]
OWN_ACCOUNT = pwd.getpwuid(os.geteuid()).pw_name

#: A scenario whose setup command leaves a marker file outside its sandbox; it states that it runs
#: as this process's own account, so nothing but the trust check stops the marker being made.
MARKING = """\
name: {name}
role: counter
task: "What does a.md say?"
setup:
  run_as: {account}
  files: {{a.md: "the answer is 42\\n"}}
  commands: ["touch {marker}"]
plan:
  - {{tool: read_file, args: {{path: a.md}}}}
agents: [compliant]
expect:
  status: done
  validators: ["test -s a.md"]
"""


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A temporary home and config folder for the processes (and this one) to use."""
    folder = tmp_path / "home"
    (folder / "config").mkdir(parents=True)
    saved = {k: os.environ.get(k) for k in ("HOME", "XDG_CONFIG_HOME", TRUSTED_DIGESTS_ENV)}
    os.environ.update(HOME=str(folder), XDG_CONFIG_HOME=str(folder / "config"))
    os.environ.pop(TRUSTED_DIGESTS_ENV, None)
    try:
        yield folder
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"), "COLUMNS": "200", **extra}
    env.pop("CI", None)
    if TRUSTED_DIGESTS_ENV not in extra:
        env.pop(TRUSTED_DIGESTS_ENV, None)
    return env


def marking(folder: Path, name: str = "incident") -> tuple[Path, Path]:
    """A scenario file that would make a marker file, and the marker's path."""
    marker = folder / f"{name}.ran"
    path = folder / f"{name}.yaml"
    path.write_text(MARKING.format(name=name, marker=marker, account=OWN_ACCOUNT), encoding="utf-8")
    return path, marker


def unstuck(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*UNSTUCK, *args], capture_output=True, text=True, timeout=300, check=False,
                          env=env_for(home, **extra), stdin=subprocess.DEVNULL)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- the command line ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["eval", "run"])
def test_an_untrusted_scenario_file_with_no_terminal_exits_non_zero_without_running_its_commands(
        tmp_path: Path, home: Path, command: str) -> None:
    path, marker = marking(tmp_path)
    args = ("eval", str(path), "--only", "--no-sessions") if command == "eval" else ("run", str(path), "--unattended")
    proc = unstuck(home, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert f"touch {marker}" in said and "setup.commands[0]" in said  # its commands are shown
    assert "not trusted" in said and "--trust" in said and "--trusted-digests" in said
    assert not marker.exists()  # nothing ran
    assert not (home / "config" / "unstuck").exists()  # and nothing was recorded


def test_trust_runs_an_untrusted_scenario_file(tmp_path: Path, home: Path) -> None:
    path, marker = marking(tmp_path)
    proc = unstuck(home, "eval", str(path), "--only", "--no-sessions", "--trust")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert marker.exists()


@pytest.mark.parametrize("where", ["option", "variable", "user file"])
def test_a_scenario_file_whose_digest_is_listed_runs(tmp_path: Path, home: Path, where: str) -> None:
    path, marker = marking(tmp_path)
    listing = f"# trusted incidents\n{digest(path)}  {path}\n"
    digests = home / "config" / "unstuck" / DIGESTS_FILE_NAME if where == "user file" else tmp_path / "t.sha256"
    digests.parent.mkdir(parents=True, exist_ok=True)
    digests.write_text(listing, encoding="utf-8")
    args = ["eval", str(path), "--only", "--no-sessions"]
    extra = {TRUSTED_DIGESTS_ENV: str(digests)} if where == "variable" else {}
    if where == "option":
        args += ["--trusted-digests", str(digests)]
    proc = unstuck(home, *args, **extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert marker.exists()


def test_a_file_changed_after_its_digest_was_listed_is_not_trusted(tmp_path: Path, home: Path) -> None:
    path, marker = marking(tmp_path)
    digests = tmp_path / "t.sha256"
    digests.write_text(f"{digest(path)}  {path}\n", encoding="utf-8")
    path.write_text(path.read_text(encoding="utf-8") + "# one more line\n", encoding="utf-8")
    proc = unstuck(home, "eval", str(path), "--only", "--no-sessions", "--trusted-digests", str(digests))
    assert proc.returncode == 2 and not marker.exists()


def test_a_malformed_digest_file_is_a_usage_error_naming_its_line(tmp_path: Path, home: Path) -> None:
    path, marker = marking(tmp_path)
    digests = tmp_path / "t.sha256"
    digests.write_text("# ok\nnot-a-digest  incident.yaml\n", encoding="utf-8")
    proc = unstuck(home, "eval", str(path), "--only", "--no-sessions", "--trusted-digests", str(digests))
    assert proc.returncode == 2 and f"{digests}, line 2" in " ".join(proc.stderr.split())
    assert not marker.exists()


def test_the_bundled_scenarios_run_without_asking_and_without_a_terminal(home: Path) -> None:
    """The README quickstart: ``unstuck eval`` on the bundled scenarios, unchanged."""
    proc = unstuck(home, "eval", "--scenarios", "wrong_path", "--agents", "compliant", "--no-sessions")
    assert proc.returncode == 0, proc.stderr
    assert "has not run before" not in proc.stderr


def _spawn(home: Path, path: Path) -> pexpect.spawn:
    return pexpect.spawn(UNSTUCK[0], [*UNSTUCK[1:], "eval", str(path), "--only", "--no-sessions"],
                         env=env_for(home), encoding="utf-8", timeout=120, dimensions=(50, 200))


def test_a_terminal_user_is_shown_the_commands_and_asked_and_no_runs_nothing(tmp_path: Path, home: Path) -> None:
    path, marker = marking(tmp_path)
    child = _spawn(home, path)
    child.expect(r"Run .* and these commands\?")
    shown = " ".join(str(child.before).split())
    assert f"touch {marker}" in shown and "test -s a.md" in shown  # the setup command and the validator
    child.sendline("n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2 and "you said no" in str(child.before)
    assert not marker.exists()
    assert not (home / "config" / "unstuck" / DIGESTS_FILE_NAME).exists()


@pytest.mark.slow
def test_a_terminal_users_yes_runs_it_and_it_is_not_asked_again(tmp_path: Path, home: Path) -> None:
    path, marker = marking(tmp_path)
    child = _spawn(home, path)
    child.expect(r"Run .* and these commands\?")
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and marker.exists()
    recorded = home / "config" / "unstuck" / DIGESTS_FILE_NAME
    assert digest(path) in read_digests(recorded)  # the user's own digest file, in the temporary config folder
    marker.unlink()
    again = unstuck(home, "eval", str(path), "--only", "--no-sessions")  # no terminal now: it is seen
    assert again.returncode == 0, again.stderr
    assert marker.exists()


# -- the rules, in-process --------------------------------------------------------------------------

FULL = """\
name: full
role: counter
task: "Deploy."
setup:
  programs:
    deploy: {script: "echo deploying"}
    aws: {output: "", stderr: "Token has expired", exit: 255}
  commands: ["git init -q ."]
tools:
  extra:
    ticket: {script: "echo filed"}
    status: {result: "green"}
plan:
  - {tool: run_command, args: {command: "deploy --prod"}}
  - {tool: read_file, args: {path: a.md}}
  - {tool: install_cli, args: {name: gh}}
replay:
  - {tool: run_command, args: {command: "aws sts get-caller-identity"}}
agents: [compliant, replay]
expect:
  status: done
  validators: ["test -f deployed"]
"""


def test_scenario_commands_lists_everything_the_file_runs(tmp_path: Path) -> None:
    path = tmp_path / "full.yaml"
    path.write_text(FULL, encoding="utf-8")
    assert scenario_commands(load_scenario(path)) == (
        RunsCommand("setup.commands[0]", "git init -q ."),
        RunsCommand("setup.programs.deploy", "echo deploying"),  # the recorded aws runs nothing of the file's
        RunsCommand("tools.extra.ticket", "echo filed"),
        RunsCommand("plan[0] (run_command)", "deploy --prod"),
        RunsCommand("plan[2] (install_cli)", "install_cli gh"),
        RunsCommand("replay[0] (run_command)", "aws sts get-caller-identity"),
        RunsCommand("expect.validators[0]", "test -f deployed"),
    )


def test_trust_is_by_content_and_the_bundled_scenarios_are_trusted(tmp_path: Path, home: Path) -> None:
    path, _ = marking(tmp_path)
    mine = load_scenario(path)
    assert mine.digest == digest(path) and not mine.bundled
    assert untrusted([mine], set()) == [mine]
    assert untrusted([mine], {digest(path)}) == []
    bundled = builtin_scenarios()
    assert all(s.bundled for s in bundled) and untrusted(bundled, set()) == []
    copy = tmp_path / "copy.yaml"  # a bundled file named by its path is the same bytes: trusted
    copy.write_bytes(Path(bundled[0].source).read_bytes())
    assert untrusted([load_scenario(copy)], set()) == []


def test_a_digest_file_named_by_the_variable_or_the_option_must_exist(tmp_path: Path, home: Path) -> None:
    assert trusted_digests() == frozenset()  # no file of the user's yet: nothing trusted, no error
    with pytest.raises(TrustError, match="no such digest file"):
        trusted_digests(tmp_path / "missing.sha256")
    with pytest.raises(TrustError, match="no such digest file"):
        trusted_digests(environ={TRUSTED_DIGESTS_ENV: str(tmp_path / "missing.sha256")})


def test_a_bundled_scenario_runs_with_the_account_and_network_it_states() -> None:
    for scenario in builtin_scenarios():
        assert confinement(scenario) == (scenario.run_as, scenario.network), scenario.name


def test_a_user_file_that_states_its_account_and_network_runs_with_them(tmp_path: Path) -> None:
    path = tmp_path / "stated.yaml"
    path.write_text(MARKING.format(name="stated", marker=tmp_path / "m", account=OWN_ACCOUNT)
                    .replace("setup:\n", "setup:\n  network: refused\n"), encoding="utf-8")
    assert confinement(load_scenario(path)) == (None, "refused")  # its own account: no change of account


#: A user's scenario without run_as or network whose validators pass only as nobody in an empty
#: network namespace: its setup command and its validators report who and where they ran.
CONFINED = """\
name: confined
role: counter
task: "What does a.md say?"
setup:
  files: {{a.md: "the answer is 42\\n"}}
  commands: ["id -un > who.txt"]
plan:
  - {{tool: read_file, args: {{path: a.md}}}}
agents: [compliant]
expect:
  status: done
  validators:
    - "test \\"$(cat who.txt)\\" = {account}"
    - "test \\"$(id -un)\\" = {account}"
    - "! python3 -c 'import socket; socket.create_connection((\\"127.0.0.1\\", {port}), 2)'"
"""


def test_a_user_files_setup_and_validators_run_as_the_sandboxs_account_with_no_network(tmp_path: Path) -> None:
    listening = socket.create_server(("127.0.0.1", 0))  # reachable from this machine's own network only
    try:
        port = listening.getsockname()[1]
        path = tmp_path / "confined.yaml"
        path.write_text(CONFINED.format(account=CONFINED_ACCOUNT, port=port), encoding="utf-8")
        scenario = load_scenario(path)
        if confinement(scenario) != (CONFINED_ACCOUNT, "none"):
            pytest.skip("this machine cannot run commands as nobody in an empty network namespace (needs root, "
                        "setpriv and unshare)")
        with socket.create_connection(("127.0.0.1", port), 2):
            pass  # this process reaches it
        _, metrics = run_scenario(scenario, "compliant")
        assert metrics.harness_error is False, metrics.error
        assert metrics.validator == "passed" and metrics.passed is True, metrics.failed_checks
    finally:
        listening.close()


# -- what the listing cannot show, and code a file runs through its variables -----------------------

#: A setup command whose credential argument is a command substitution (the redaction masks it,
#: so the listing cannot show what runs) and one carrying a GitHub token (a secret, never shown).
MASKED = """\
name: masked
role: counter
task: "What does a.md say?"
setup:
  run_as: {account}
  files: {{a.md: "the answer is 42\\n"}}
  commands:
    - "true"
    - "curl -s -u me:$(touch${{IFS}}{marker}) http://127.0.0.1:9/ || true"
    - "export GH_TOKEN={token}; true"
plan:
  - {{tool: read_file, args: {{path: a.md}}}}
agents: [compliant]
expect:
  status: done
  validators: ["test -s a.md"]
"""


def _github_token() -> tuple[str, tuple[str, ...]]:
    from secret_samples import samples

    sample = next(s for s in samples() if s.text.startswith("ghp_"))
    return sample.text, sample.secrets


def _line_of(path: Path, fragment: str) -> int:
    """The line (from 1) of ``path`` that holds ``fragment``, read from the file itself."""
    return next(i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1) if fragment in line)


def test_a_masked_command_is_shown_masked_and_named_by_its_line_and_never_offered_for_a_yes(
        tmp_path: Path, home: Path) -> None:
    token, secrets = _github_token()
    marker = tmp_path / "masked.ran"
    path = tmp_path / "masked.yaml"
    path.write_text(MASKED.format(account=OWN_ACCOUNT, marker=marker, token=token), encoding="utf-8")
    child = _spawn(home, path)  # a terminal: a file whose commands can all be shown would be asked about
    child.expect(pexpect.EOF)
    child.close()
    said = " ".join(clean_terminal_text(str(child.before)).split())  # rich's colours off
    assert child.exitstatus == 2 and "these commands?" not in said  # no question, no waiting
    assert not any(secret in said for secret in secrets)  # the secret is never shown
    assert "not shown as it runs" in said and "not offered for a yes" in said and "--trust" in said
    curl, export = _line_of(path, "curl -s -u me:"), _line_of(path, "export GH_TOKEN=")
    assert f"line {curl}, line {export}" in said and str(path) in said
    first = _line_of(path, '- "true"')
    assert f"setup.commands[0] (line {first}): true" in said  # shown whole, not flagged
    assert not marker.exists()
    assert not (home / "config" / "unstuck" / DIGESTS_FILE_NAME).exists()


def test_shown_commands_mark_what_cannot_be_shown_as_it_runs(tmp_path: Path) -> None:
    token, _ = _github_token()
    path = tmp_path / "masked.yaml"
    path.write_text(MASKED.format(account=OWN_ACCOUNT, marker=tmp_path / "m", token=token)
                    .replace('["test -s a.md"]', '["true \\x1b[2K\\rnothing to see"]'), encoding="utf-8")
    scenario = load_scenario(path)
    shown = {item.where: item for item in shown_commands(scenario, scenario_text(scenario))}
    assert shown["setup.commands[0]"].exact and shown["setup.commands[0]"].line == _line_of(path, '- "true"')
    assert not shown["setup.commands[1]"].exact and "$(touch" not in shown["setup.commands[1]"].text
    assert not shown["setup.commands[2]"].exact and token not in shown["setup.commands[2]"].text
    assert not shown["expect.validators[0]"].exact and "\x1b" not in shown["expect.validators[0]"].text
    assert shown["expect.validators[0]"].line == _line_of(path, "validators:")
    changed = load_scenario(path)
    path.write_text(path.read_text(encoding="utf-8") + "# edited since it was read\n", encoding="utf-8")
    assert scenario_text(changed) is None  # lines are read only from the file that was loaded


#: A scenario whose setup.env makes every bash run a file of its setup.files first (bash(1)
#: INVOCATION, BASH_ENV); its listed commands run nothing of their own.
BASH_ENV_HOOK = """\
name: hook
role: counter
task: "What does a.md say?"
setup:
  run_as: {account}
  env: {{BASH_ENV: ./.hook.sh, AWS_PROFILE: prod, HTTPS_PROXY: "http://127.0.0.1:9"}}
  files: {{a.md: "the answer is 42\\n", .hook.sh: "touch {marker}\\n"}}
  commands: ["true"]
plan:
  - {{tool: read_file, args: {{path: a.md}}}}
agents: [compliant]
expect:
  status: done
  validators: ["test -s a.md"]
"""


def test_a_setup_env_variable_that_runs_code_is_listed_with_the_file_it_runs_and_gated(
        tmp_path: Path, home: Path) -> None:
    marker = tmp_path / "hook.ran"
    path = tmp_path / "hook.yaml"
    path.write_text(BASH_ENV_HOOK.format(account=OWN_ACCOUNT, marker=marker), encoding="utf-8")
    listed = {item.where: item for item in scenario_commands(load_scenario(path))}
    assert listed["setup.env.BASH_ENV"].command == "BASH_ENV=./.hook.sh"
    assert listed["setup.files..hook.sh (through setup.env.BASH_ENV)"].command == f"touch {marker}\n"
    assert not any("AWS_PROFILE" in w or "HTTPS_PROXY" in w for w in listed)  # they run no code
    refused = unstuck(home, "eval", str(path), "--only", "--no-sessions")
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2 and "setup.env.BASH_ENV" in said and f"touch {marker}" in said
    assert not marker.exists()
    ran = unstuck(home, "eval", str(path), "--only", "--no-sessions", "--trust")  # what it was listed for: it runs
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert marker.exists()


@pytest.mark.parametrize("name", [
    "BASH_ENV", "ENV", "PROMPT_COMMAND", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONSTARTUP",
    "PYTHONHOME", "NODE_OPTIONS", "PERL5OPT", "PERL5LIB", "RUBYOPT", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF",
    "GIT_EDITOR", "GIT_ASKPASS", "GIT_CONFIG_GLOBAL", "EDITOR", "VISUAL", "PAGER", "npm_config_script_shell",
])
def test_every_variable_the_manuals_say_runs_or_loads_code_is_listed(tmp_path: Path, name: str) -> None:
    """bash(1), ld.so(8), python(1), node's docs, perlrun(1), ruby(1), git(1), environ(7), npm's
    config docs: each names a variable whose value is code or where code is loaded from."""
    path = tmp_path / "env.yaml"
    path.write_text(BASH_ENV_HOOK.format(account=OWN_ACCOUNT, marker=tmp_path / "m")
                    .replace("BASH_ENV: ./.hook.sh", f"{name}: ./.hook.sh"), encoding="utf-8")
    listed = [item.where for item in scenario_commands(load_scenario(path))]
    assert f"setup.env.{name}" in listed and f"setup.files..hook.sh (through setup.env.{name})" in listed
