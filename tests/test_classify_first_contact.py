"""Issue 25: evidence inside wrappers first, a success status that never hides a waiting sign-in
or a failed step, suggestions only from imperatives with a command-shaped argument, and the
kinds of fault the first-contact cases (../shared/cases/tool_outputs_3.jsonl) showed, each as
the rule it follows."""

from __future__ import annotations

import json

import pytest

from unstuck.core.situations import Kind
from unstuck.recognise.classify import Stage, classify_output, explain_output

# --- evidence inside wrappers first -------------------------------------------------------------


def _mcp(text: str) -> str:
    return json.dumps({"content": [{"type": "text", "text": text}], "isError": True})


@pytest.mark.parametrize(
    ("wrapped", "kind"),
    [
        (_mcp("You must be authenticated to view this repository."), Kind.AUTH),
        (json.dumps({"jsonrpc": "2.0", "id": 7, "result": {
            "content": [{"type": "text", "text": "Error: connect ECONNREFUSED 127.0.0.1:5432"}], "isError": True}}),
         Kind.UNAVAILABLE),
        (json.dumps({"jsonrpc": "2.0", "id": 7, "error": {"code": -32603,
                                                          "message": "sqlite3.OperationalError: attempt to write a readonly database"}}),
         Kind.PERMISSION),
        (json.dumps({"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                     "content": "Budget has been exceeded! Current cost: 5.1, Max budget: 5.0"}), Kind.QUOTA),
    ],
)
def test_the_text_inside_a_failed_wrapper_decides_before_the_wrappers_generic_rule(wrapped: str, kind: Kind) -> None:
    found = explain_output("mcp", {}, wrapped)
    assert found.situation is not None and found.situation.kind is kind
    assert found.decided_by is not None and found.decided_by.rule.startswith("inside the wrapper: ")


def test_a_failed_mcp_result_whose_text_says_nothing_more_stays_an_execution_error() -> None:
    situation = classify_output("mcp", {}, _mcp("the tool could not complete"))
    assert situation is not None and situation.kind is Kind.EXECUTION_ERROR


@pytest.mark.parametrize(
    "output",
    [
        "! First copy your one-time code: 1A2B-3C4D\nPress Enter to open github.com in your browser...",
        "To sign in, use a web browser to open the page https://microsoft.com/devicelogin and enter the code ABCD1234 to authenticate.",
        "Enter MFA code for arn:aws:iam::123456789012:mfa/user:",
    ],
)
def test_a_success_status_never_makes_a_waiting_sign_in_ok(output: str) -> None:
    situation = classify_output("cli", {}, output, exit_code=0)
    assert situation is not None and (situation.kind, situation.interactive) == (Kind.AUTH, True)


def test_a_sign_in_that_completed_after_its_device_code_is_a_success() -> None:
    output = ("! First copy your one-time code: 1A2B-3C4D\nPress Enter to open github.com in your browser...\n"
              "✓ Authentication complete.\n✓ Logged in as octocat")
    assert classify_output("gh", {}, output, exit_code=0) is None


@pytest.mark.parametrize("exit_code", [0, 1])
def test_a_ci_steps_failure_line_is_a_failure_whatever_the_status(exit_code: int) -> None:
    situation = classify_output("actions", {}, "Run make test\nError: Process completed with exit code 1.",
                                exit_code=exit_code)
    assert situation is not None and situation.kind is Kind.EXECUTION_ERROR


def test_a_ci_step_that_completed_with_exit_code_0_is_no_failure() -> None:
    assert classify_output("actions", {}, "Process completed with exit code 0.", exit_code=0) is None


@pytest.mark.parametrize(
    ("output", "kind"),
    [
        ('Error from server (NotFound): pods "web-0" not found', Kind.NOT_FOUND),
        ('Error from server (Forbidden): pods is forbidden: User "dev" cannot list resource "pods"', Kind.PERMISSION),
        ('Error from server (InternalError): an error on the server ("") has prevented the request from succeeding',
         Kind.UNAVAILABLE),
    ],
)
def test_kubectls_error_from_server_without_an_exit_code_is_a_failure(output: str, kind: Kind) -> None:
    situation = classify_output("kubectl", {}, output)
    assert situation is not None and situation.kind is kind


# --- a suggestion only from an imperative with a command-shaped argument --------------------------

#: Package managers' log trailers, as their sources print them: none holds a command to run.
LOG_TRAILERS = {
    # npm lib/utils/exit-handler.js (npm 7-9 with the npm ERR! prefix, npm 10 with npm error)
    "npm": "npm ERR! code E404\nnpm ERR! A complete log of this run can be found in:\n"
           "npm ERR!     /home/u/.npm/_logs/2024-01-01T00_00_00_000Z-debug-0.log",
    "npm10": "npm error code E404\nnpm error A complete log of this run can be found in: "
             "/home/u/.npm/_logs/2024-01-01T00_00_00_000Z-debug-0.log",
    # pip (legacy resolver's log file; subprocess note)
    "pip": "ERROR: Command errored out with exit status 1\nStoring debug log for failure in /root/.pip/pip.log",
    "pip-subprocess": "error: subprocess-exited-with-error\nnote: This error originates from a subprocess, and is "
                      "likely not a problem with pip.",
    # cargo: a run hint that names an option, and one that names an environment variable
    "cargo": "error: could not compile `demo` (bin \"demo\") due to 1 previous error\n"
             "To learn more, run the command again with --verbose.",
    "cargo-backtrace": "thread 'main' panicked at src/main.rs:2:5:\nboom\n"
                       "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
    # yarn v1 (cli/index.js): the documentation link of the run command
    "yarn": "error Command failed with exit code 1.\n"
            "info Visit https://yarnpkg.com/en/docs/cli/run for documentation about this command.",
    # pnpm's recursive run failure and its lifecycle line
    "pnpm": " ERR_PNPM_RECURSIVE_RUN_FIRST_FAIL  app@1.0.0 build: `tsc`\nExit status 2\n ELIFECYCLE  Command failed with exit code 2.",
    # composer's dependency resolution hint
    "composer": "Your requirements could not be resolved to an installable set of packages.\nUse the option "
                "--with-all-dependencies (-W) to allow upgrades, downgrades and removals for packages currently locked.",
    # gem's native extension failure
    "gem": "ERROR: Failed to build gem native extension.\nGem files will remain installed in "
           "/var/lib/gems/3.1.0/gems/nokogiri-1.13.1 for inspection.\n"
           "Results logged to /var/lib/gems/3.1.0/extensions/x86_64-linux/3.1.0/nokogiri-1.13.1/gem_make.out",
    # Maven's debug hint; Gradle's "Try" block
    "maven": "[ERROR] Failed to execute goal on project app\n[ERROR] Re-run Maven using the -X switch to enable full "
             "debug logging.",
    "gradle": "FAILURE: Build failed with an exception.\n* Try:\n> Run with --stacktrace option to get the stack trace.\n"
              "> Run with --info or --debug option to get more log output.",
    # GitLab Runner's timeout line: a negated verb
    "gitlab": "WARNING: step_script could not run to completion because the timeout was exceeded.",
}


@pytest.mark.parametrize("manager", sorted(LOG_TRAILERS))
def test_a_package_managers_log_trailer_is_never_a_suggestion(manager: str) -> None:
    situation = classify_output(manager, {}, LOG_TRAILERS[manager], exit_code=1)
    assert situation is not None and situation.suggestion is None


@pytest.mark.parametrize(
    ("output", "suggestion"),
    [
        # pip's self-update notice (src/pip/_internal/self_outdated_check.py)
        ("ERROR: No matching distribution found for nopkg\n[notice] To update, run: pip install --upgrade pip",
         "pip install --upgrade pip"),
        # rustc's error index hint
        ("error[E0425]: cannot find value `x` in this scope\nFor more information about this error, try "
         "`rustc --explain E0425`.", "rustc --explain E0425"),
        # go's module hint (cmd/go: to update it:\n\tgo mod tidy), after "run:"
        ("go: updates to go.mod needed; to update it, run:\n\tgo mod tidy", "go mod tidy"),
    ],
)
def test_an_imperative_with_a_command_is_the_tools_suggestion(output: str, suggestion: str) -> None:
    situation = classify_output("tool", {}, output, exit_code=1)
    assert situation is not None and situation.suggestion == suggestion


def test_a_verb_after_a_determiner_or_a_failure_is_no_suggestion() -> None:
    for output in ("Error: the last run `make all` failed", "Error: failed to run `npm install`: exit status 1",
                   "Error: You should not use your ability to run tests to execute other actions."):
        situation = classify_output("tool", {}, output, exit_code=1)
        assert situation is not None and situation.suggestion is None, output


# --- the kinds of fault the first-contact cases showed --------------------------------------------


def test_a_token_read_from_an_unknown_terminal_is_an_interactive_sign_in() -> None:
    situation = classify_output("doctl", {}, "Error: Unable to read DigitalOcean access token: unknown terminal")
    assert situation is not None and (situation.kind, situation.interactive) == (Kind.AUTH, True)


def test_a_token_demanded_in_a_non_interactive_environment_is_an_interactive_sign_in() -> None:
    output = ("image:build: ✘ [ERROR] In a non-interactive environment, it's necessary to set a CLOUDFLARE_API_TOKEN "
              "environment variable for wrangler to work.\nimage:build:  ELIFECYCLE  Command failed with exit code 1.")
    situation = classify_output("wrangler", {}, output, exit_code=1)
    assert situation is not None and (situation.kind, situation.interactive) == (Kind.AUTH, True)


def test_a_registry_refusing_an_existing_version_after_an_otp_prompt_is_a_conflict() -> None:
    output = ("Pushing gem to https://rubygems.org...\nYou have enabled multi-factor authentication. Please enter OTP "
              "code.\nCode:   XXXXXX\nRepushing of gem versions is not allowed.\nPlease bump the version number and "
              "push a new different release.")
    situation = classify_output("gem", {}, output, exit_code=1)
    assert situation is not None and (situation.kind, situation.interactive) == (Kind.CONFLICT, False)


@pytest.mark.parametrize(
    "output",
    [
        "npm ERR! 403 403 Forbidden - PUT https://registry.npmjs.org/pkg - You cannot publish over the previously "
        "published versions: 1.0.0.",
        "HTTPError: 400 Bad Request from https://upload.pypi.org/legacy/\nFile already exists. See "
        "https://pypi.org/help/#file-name-reuse for more information.",
        "error: failed to publish to registry at https://crates.io\n\nCaused by:\n  the remote server responded with "
        "an error: crate version `0.1.0` is already uploaded",
    ],
)
def test_every_registrys_refusal_of_an_existing_version_is_a_conflict(output: str) -> None:
    situation = classify_output("publish", {}, output, exit_code=1)
    assert situation is not None and situation.kind is Kind.CONFLICT


def test_a_driver_that_supports_another_browser_version_is_not_installed() -> None:
    output = ("selenium.common.exceptions.SessionNotCreatedException: Message: session not created: This version of "
              "ChromeDriver only supports Chrome version 114\nCurrent browser version is 135.0.7049.52")
    situation = classify_output("selenium", {}, output, exit_code=1)
    assert situation is not None and situation.kind is Kind.NOT_INSTALLED


def test_a_password_prompt_left_waiting_inside_a_logs_chunk_is_an_interactive_sign_in() -> None:
    output = "18518 1569401492.74748: stdout chunk (state=2):\n>>>Enter password: <<<\n"
    situation = classify_output("ansible", {}, output)
    assert situation is not None and (situation.kind, situation.interactive) == (Kind.AUTH, True)


def test_a_french_execution_policy_refusal_is_permission() -> None:
    output = ("npm : Impossible de charger le fichier C:\\Program Files\\nodejs\\npm.ps1, car l’exécution de scripts "
              "est \ndésactivée sur ce système. Pour plus d’informations, consultez about_Execution_Policies.")
    situation = classify_output("powershell", {}, output, exit_code=1)
    assert situation is not None and situation.kind is Kind.PERMISSION


def test_an_agent_hosts_denied_tool_permission_is_a_persons_decision() -> None:
    output = ("Permission to use Bash has been denied because Claude Code is running in don't ask mode. If you believe "
              "this capability is essential, STOP and explain to the user what you were trying to do.")
    situation = classify_output("claude-code", {}, output)
    assert situation is not None and (situation.kind, situation.interactive) == (Kind.PERMISSION, True)


def test_a_provider_out_of_capacity_is_unavailable_not_a_network_fault() -> None:
    output = ("Error: failed to fetch an image or build from source: error connecting to docker: Couldn't allocate "
              "volume, not enough compute capacity left in iad\nError: Process completed with exit code 1.")
    situation = classify_output("flyctl", {}, output, exit_code=1)
    assert situation is not None and (situation.kind, situation.retryable) == (Kind.UNAVAILABLE, True)


def test_a_ci_job_past_its_timeout_is_a_retryable_timeout() -> None:
    output = ("Terminated\nWARNING: step_script could not run to completion because the timeout was exceeded.\n"
              "ERROR: Job failed: execution took longer than 30s seconds")
    found = explain_output("gitlab-runner", {}, output, exit_code=1)
    assert found.situation is not None and (found.situation.kind, found.situation.retryable) == (Kind.TIMEOUT, True)
    assert found.decided_by is not None and found.decided_by.stage is Stage.CONCEPT


def test_a_proxy_that_refused_the_tunnel_is_network_whatever_status_it_gave() -> None:
    output = ("CondaHTTPError: HTTP 000 CONNECTION FAILED for url <https://repo.example.org/main/repodata.json>\n"
              "ProxyError(MaxRetryError(\"HTTPSConnectionPool(host='repo.example.org', port=443): Max retries exceeded "
              "(Caused by ProxyError('Cannot connect to proxy.', OSError('Tunnel connection failed: 503 Service "
              "Unavailable',)))\"))")
    situation = classify_output("conda", {}, output, exit_code=1)
    assert situation is not None and (situation.kind, situation.retryable) == (Kind.NETWORK, True)
