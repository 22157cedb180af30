"""The scenario state keys (env, path, programs, commands, read_only, shell_policy, services,
api_faults), each applied to a real sandbox and seen by the real tools, and each malformed key
refused with the file, the field and the allowed values."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from unstuck.commands.parse import command_operators
from unstuck.core.situations import Kind
from unstuck.core.tools import ToolResult
from unstuck.evals.fake_github import FAULTS
from unstuck.evals.runner import prepare_sandbox
from unstuck.evals.sandbox import Sandbox, SetupCommandError
from unstuck.evals.scenario_state import (
    HTTP_METHODS,
    OPERATORS,
    Response,
    Route,
    ScenarioState,
    Service,
    ShellPolicy,
    StandInProgram,
    parse_state,
)
from unstuck.evals.scenarios import ScenarioError, load_scenario
from unstuck.toolkit.workspace import standard_tools

SCENARIO = """\
name: state_demo
role: counter
task: "do it"
plan:
  - {{tool: run_command, args: {{command: "true"}}}}
expect:
  status: done
setup:
{setup}
"""


def scenario_file(tmp_path: Path, setup: str) -> Path:
    path = tmp_path / "state_demo.yaml"
    path.write_text(SCENARIO.format(setup=setup), encoding="utf-8")
    return path


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with Sandbox() as sandbox:
        yield sandbox


def run(sandbox: Sandbox, command: str) -> ToolResult:
    return standard_tools(sandbox.workspace())["run_command"].invoke({"command": command})


# -- applied to a real sandbox -------------------------------------------------------------------


def test_stand_in_script_exit_code_and_output_reach_run_command(box: Sandbox) -> None:
    box.apply_state(ScenarioState(programs=(StandInProgram("deploy", script='echo "deploying $1"', exit=3),)))
    result = run(box, "deploy prod")
    assert result.exit_code == 3 and not result.ok
    assert "deploying prod" in result.content


def test_recorded_output_is_replayed_on_its_streams_with_its_exit_code(box: Sandbox) -> None:
    recorded = StandInProgram("aws", output="", stderr="Error when retrieving token from sso: Token has expired\n",
                              exit=255)
    box.apply_state(ScenarioState(programs=(recorded,)))
    out = box.workspace().run("aws s3 ls")
    assert (out.exit_code, out.stdout, out.stderr) == (255, "", recorded.stderr)


def test_stand_in_comes_before_the_host_program_of_the_same_name(box: Sandbox) -> None:
    box.apply_state(ScenarioState(programs=(StandInProgram("git", output="git version 0.0-stand-in\n"),)))
    assert box.workspace().run("git --version").stdout == "git version 0.0-stand-in\n"


def test_env_variables_and_path_folders_reach_the_tools(box: Sandbox) -> None:
    (box.work / "tools" / "bin").mkdir(parents=True)
    helper = box.work / "tools" / "bin" / "helper"
    helper.write_text("#!/bin/sh\necho helper-ran\n", encoding="utf-8")
    helper.chmod(0o755)
    box.apply_state(ScenarioState(env=(("AWS_PROFILE", "prod"),), path=("tools/bin",)))
    out = box.workspace().run('echo "$AWS_PROFILE"; helper; command -v helper')
    assert out.stdout.splitlines() == ["prod", "helper-ran", str(helper)]


def test_setup_commands_run_in_the_workspace_before_the_agent(box: Sandbox) -> None:
    box.apply_state(ScenarioState(commands=("git init -q . && git config user.name ci", "echo ready > state.txt")))
    assert (box.work / ".git").is_dir()
    assert (box.work / "state.txt").read_text(encoding="utf-8") == "ready\n"


def test_a_failing_setup_command_is_a_harness_error_naming_it(box: Sandbox) -> None:
    with pytest.raises(SetupCommandError, match=r"setup command 'ls /no/such/dir' exited 2") as caught:
        box.apply_state(ScenarioState(commands=("ls /no/such/dir",)))
    assert caught.value.exit_code == 2  # ls(1): 2 for "serious trouble" such as a missing operand


def test_read_only_file_refuses_a_write_with_the_real_errno(box: Sandbox) -> None:
    box.write_files({"docs/guide.md": "v1\n", "setup.cfg": "[x]\n"})
    box.apply_state(ScenarioState(read_only=("docs", "setup.cfg")))
    out = box.workspace().run("echo v2 > docs/guide.md; echo new > docs/new.md; echo y >> setup.cfg")
    assert out.exit_code != 0
    # as root the immutable attribute answers EPERM (chattr(1)); an unprivileged user gets EACCES
    reasons = (os.strerror(errno.EPERM), os.strerror(errno.EACCES))
    assert out.stderr.count("docs/guide.md: ") == 1 and any(r in out.stderr for r in reasons)
    assert (box.work / "docs" / "guide.md").read_text(encoding="utf-8") == "v1\n"
    assert not (box.work / "docs" / "new.md").exists()
    assert (box.work / "setup.cfg").read_text(encoding="utf-8") == "[x]\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="running tools as another user needs root")
def test_read_only_as_run_as_user_is_eacces_and_cannot_be_chmodded_back(tmp_path: Path) -> None:
    with Sandbox(tmp_path / "box", run_as="nobody") as box:
        box.write_files({"notes.txt": "keep\n"})
        box.apply_state(ScenarioState(read_only=("notes.txt",)))
        out = box.workspace().run("chmod u+w notes.txt; echo x > notes.txt")
        assert out.exit_code != 0
        assert os.strerror(errno.EPERM) in out.stderr  # chmod(2) by a non-owner; or the immutable file
        assert (box.work / "notes.txt").read_text(encoding="utf-8") == "keep\n"


def test_a_missing_read_only_path_is_refused(box: Sandbox) -> None:
    with pytest.raises(ValueError, match="field 'setup.read_only': 'absent.txt' does not exist in the workspace"):
        box.apply_state(ScenarioState(read_only=("absent.txt",)))


def test_denied_operator_is_refused_before_anything_runs(box: Sandbox) -> None:
    box.apply_state(ScenarioState(shell_policy=ShellPolicy(deny_operators=frozenset({"&&", ">"}))))
    refused = run(box, "touch made.txt && echo done")
    assert not refused.executed and not (box.work / "made.txt").exists()
    assert refused.declared is not None and refused.declared.kind is Kind.PERMISSION
    assert "&&" in refused.content
    assert not run(box, "echo hi > out.txt").executed
    allowed = run(box, "echo hi; echo 'a && b > c'")  # `;` is not denied; quoted text is no operator
    assert allowed.ok and "a && b > c" in allowed.content


def test_denied_program_is_refused_as_permission_on_it(box: Sandbox) -> None:
    box.apply_state(ScenarioState(shell_policy=ShellPolicy(deny_programs=frozenset({"curl"}))))
    refused = run(box, "curl -sS http://127.0.0.1:9/")
    assert not refused.executed
    assert refused.declared is not None and (refused.declared.kind, refused.declared.subject) == (
        Kind.PERMISSION, "curl")


def test_operators_are_the_shells_not_those_of_tests_arithmetic_or_quotes() -> None:
    # bash(1): `>` and `&&` inside [[ ]] and $(( )) compare values; they are not operators of the line
    assert command_operators("[[ a > b && c ]]; echo $((1 > 2))") == {";"}
    assert command_operators("git log | head -n 3 2>/dev/null") == {"|", ">"}
    assert command_operators("x=$(a || b) &") == {"||", "&"}
    assert command_operators("bash -c 'a && b'") == frozenset()  # a string to the line's own shell


def test_service_answers_429_twice_then_200_to_real_curl(box: Sandbox) -> None:
    route = Route("GET", "/v1/items", (
        Response(429, (("Retry-After", "1"),), "slow down\n"),
        Response(429, (("Retry-After", "1"),), "slow down\n"),
        Response(200, (("Content-Type", "application/json"),), '{"items": []}'),
    ))
    box.apply_state(ScenarioState(services=(Service("api", "API_URL", (route,)),)))
    url = box.env["API_URL"]
    assert url.startswith("http://127.0.0.1:")
    line = 'curl -s -w " %{http_code}\\n" "$API_URL/v1/items?page=1"'
    outputs = [box.workspace().run(line).stdout for _ in range(4)]
    assert outputs == ["slow down\n 429\n", "slow down\n 429\n", '{"items": []} 200\n', '{"items": []} 200\n']
    missing = box.workspace().run('curl -s -o /dev/null -w "%{http_code}" -X POST "$API_URL/v1/items"')
    assert missing.stdout == "405"  # RFC 9110 15.5.6: a known path, another method


def test_service_is_reached_by_pythons_urllib_in_the_sandbox(box: Sandbox) -> None:
    route = Route("POST", "/graphql", (Response(502, (), "bad gateway"), Response(200, (), "ok")))
    box.apply_state(ScenarioState(services=(Service("gql", "GQL_URL", (route,)),)))
    script = (
        "import os, urllib.request, urllib.error\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        r = urllib.request.urlopen(urllib.request.Request(os.environ['GQL_URL'] + '/graphql', b'{}'))\n"
        "        print(r.status, r.read().decode())\n"
        "    except urllib.error.HTTPError as e:\n"
        "        print(e.code, e.read().decode())\n"
    )
    out = box.workspace().run(["python3", "-c", script])
    assert out.stdout.splitlines() == ["502 bad gateway", "200 ok"], out.stderr


def test_services_stop_with_the_sandbox() -> None:
    route = Route("GET", "/", (Response(200, (), "up"),))
    with Sandbox() as sandbox:
        sandbox.apply_state(ScenarioState(services=(Service("s", "S_URL", (route,)),)))
        url = sandbox.env["S_URL"]
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.URLError):
        opener.open(url + "/", timeout=5)


def test_graphql_route_fails_while_rest_route_works_on_the_fake_github(gh_path: str) -> None:
    with Sandbox() as box:
        box.serve_github()
        box.sign_in_gh()
        box.apply_state(ScenarioState(api_faults=(("/graphql", "rate_limited"),)))
        rest = run(box, "gh api repos/cli/cli --jq .description")
        graphql = run(box, "gh api graphql -f query='query { repository(owner: \"cli\", name: \"cli\") { name } }'")
    assert rest.ok and rest.content.strip() == "GitHub's official command line tool"
    assert not graphql.ok and "API rate limit exceeded" in graphql.content


def test_scenario_file_state_is_applied_by_prepare_sandbox(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, """\
  files: {notes.txt: "hello\\n"}
  env: {STAGE: prod}
  programs:
    deploy: {script: 'echo "to $STAGE"', exit: 4}
  commands: ["cp notes.txt copy.txt"]
  read_only: [copy.txt]
  shell_policy: {deny_operators: ["|"]}
  services:
    api:
      url_env: API_URL
      routes:
        - {path: /health, responses: [{status: 200, body: {ok: true}}]}
  api_faults: {/graphql: bad_gateway_once}""")
    scenario = load_scenario(path)
    assert scenario.state.api_faults == (("/graphql", "bad_gateway_once"),)
    with prepare_sandbox(scenario) as box:
        out = box.workspace().run("deploy; curl -s \"$API_URL/health\"")
        assert (out.exit_code, out.stdout) == (0, "to prod\n" + json.dumps({"ok": True}))
        assert not run(box, "cat copy.txt | wc -l").executed
        assert (box.work / "copy.txt").stat().st_mode & 0o222 == 0


# -- malformed keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(("setup", "field", "allowed"), [
    ("  env: {1BAD: x}", "setup.env", "not a variable name"),
    ("  env: {PATH: /x}", "setup.env.PATH", "setup.path"),
    ("  env: {PORT: 80}", "setup.env.PORT", "must be a string"),
    ("  path: [/usr/local/bin]", "setup.path", "relative path inside the workspace"),
    ("  programs: {aws: {script: x, output: y}}", "setup.programs.aws", "either script"),
    ("  programs: {aws: {stdout: y}}", "setup.programs.aws", "allowed: exit, output, script, stderr"),
    ("  programs: {aws: {output: y, exit: 300}}", "setup.programs.aws.exit", "from 0 to 255"),
    ("  programs: {'a/b': {exit: 1}}", "setup.programs", "not a program name"),
    ("  commands: echo hi", "setup.commands", "list of non-empty strings"),
    ("  read_only: [../etc]", "setup.read_only", "relative path inside the workspace"),
    ("  shell_policy: {deny_operators: ['&&&']}", "setup.shell_policy.deny_operators[0]",
     "allowed: " + " ".join(OPERATORS)),
    ("  shell_policy: {deny: [curl]}", "setup.shell_policy", "allowed: deny_operators, deny_programs"),
    ("  services: {api: {routes: [{path: /, responses: [{status: 200}]}]}}", "setup.services.api.url_env",
     "not a variable name"),
    ("  services: {api: {url_env: U, routes: [{method: FETCH, path: /, responses: [{status: 200}]}]}}",
     "setup.services.api.routes[0].method", "allowed: " + ", ".join(HTTP_METHODS)),
    ("  services: {api: {url_env: U, routes: [{path: /, responses: [{status: 700}]}]}}",
     "setup.services.api.routes[0].responses[0].status", "from 100 to 599"),
    ("  services: {api: {url_env: U, routes: [{path: /, responses: []}]}}",
     "setup.services.api.routes[0].responses", "non-empty list of {status, headers, body}"),
    ("  services: {api: {url_env: U, routes: [{path: x, responses: [{status: 200}]}]}}",
     "setup.services.api.routes[0].path", "must start with /"),
    ("  api_faults: {/graphql: melted}", "setup.api_faults./graphql", "allowed: " + ", ".join(FAULTS)),
    ("  api_faults: {graphql: rate_limited}", "setup.api_faults", "must start with /"),
    ("  services: {api: {url_env: PATH, routes: [{path: /, responses: [{status: 200}]}]}}",
     "setup.services.api.url_env", "PATH is a variable the sandbox sets itself"),
    ("  services: {api: {url_env: https_proxy, routes: [{path: /, responses: [{status: 200}]}]}}",
     "setup.services.api.url_env", "https_proxy is a variable the sandbox sets itself"),
    ("  services: {api: {url_env: U, routes: [{path: /, responses: [{status: 200, headers: {X-A: \"a\\r\\nSet-Cookie: x\"}}]}]}}",
     "setup.services.api.routes[0].responses[0].headers.X-A", "no line break"),
    ("  services: {api: {url_env: U, routes: [{path: /, responses: [{status: 200, headers: {'X A:': b}}]}]}}",
     "setup.services.api.routes[0].responses[0].headers", "is not a header name"),
])
def test_malformed_state_key_names_file_field_and_allowed_values(
    tmp_path: Path, setup: str, field: str, allowed: str,
) -> None:
    path = scenario_file(tmp_path, setup)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: field {field!r}: "), message
    assert allowed in message


def test_a_scenario_without_state_keys_has_the_empty_state(tmp_path: Path) -> None:
    assert load_scenario(scenario_file(tmp_path, "  files: {a.md: x}")).state == ScenarioState()


def test_parse_state_reads_json_bodies_and_header_numbers() -> None:
    state = parse_state({"services": {"api": {"url_env": "API_URL", "routes": [
        {"method": "post", "path": "/graphql",
         "responses": [{"status": 200, "headers": {"X-RateLimit-Remaining": 0}, "body": {"data": None}}]},
    ]}}}, "inline")
    answer = state.services[0].routes[0].responses[0]
    assert state.services[0].routes[0].method == "POST"
    assert answer.headers == (("X-RateLimit-Remaining", "0"), ("Content-Type", "application/json"))
    assert json.loads(answer.body) == {"data": None}
