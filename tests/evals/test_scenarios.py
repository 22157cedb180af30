from __future__ import annotations

from pathlib import Path

import pytest

from unstuck.core.situations import Kind
from unstuck.core.tools import ToolCall
from unstuck.evals.scenarios import (
    Forbidden,
    GhState,
    ScenarioError,
    ScenarioRole,
    UnguardedExpectation,
    ValidatorSpec,
    builtin_scenarios,
    check_paths,
    load_paths,
    load_scenario,
    load_scenarios,
    scenario_files,
    scenario_template,
)

GOOD = """\
name: demo
role: counter
task: "do it"
plan:
  - {tool: read_file, args: {path: a.md}}
expect:
  status: done
"""


def write(tmp_path: Path, text: str, name: str = "demo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_bundled_scenarios_load_with_their_roles() -> None:
    by_name = {s.name: s for s in builtin_scenarios()}
    assert {"gh_logged_out", "gh_missing", "wrong_path"} <= set(by_name)
    assert by_name["gh_logged_out"].gh is GhState.LOGGED_OUT
    assert by_name["gh_logged_out"].expect.kind is Kind.AUTH
    assert by_name["gh_missing"].gh is GhState.MISSING
    assert by_name["wrong_path"].role is ScenarioRole.COUNTER


def test_minimal_scenario_gets_defaults(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, GOOD))
    assert scenario.agents == ("improviser", "retrier", "compliant")
    assert scenario.gh is GhState.LOGGED_OUT and scenario.plan[0].tool == "read_file"


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (GOOD.replace("status: done", "status: finished"), "expect.status", "unknown value 'finished'"),
        (GOOD.replace("role: counter", "role: sometimes"), "role", "unknown value 'sometimes'"),
        (GOOD.replace("role: counter\n", ""), "role", "is required"),
        (GOOD.replace('task: "do it"', "task: 3"), "task", "non-empty string"),
        (GOOD.replace("  - {tool: read_file, args: {path: a.md}}", "  - {tool: read_file, args: [a.md]}"),
         "plan[0].args", "must be a mapping"),
        (GOOD.replace("plan:\n  - {tool: read_file, args: {path: a.md}}\n", "plan: []\n"), "plan", "at least one call"),
        (GOOD + "agents: [wizard]\n", "agents[0]", "unknown agent 'wizard'"),
        (GOOD + "setup: {gh: sleepy}\n", "setup.gh", "unknown value 'sleepy'"),
        (GOOD + "colour: red\n", "(top level)", "unknown key(s) colour"),
        (GOOD.replace("status: done", "status: blocked"), "expect.kind", "is required"),
        (GOOD.replace("status: done", "status: blocked\n  kind: offline"), "expect.kind", "unknown value 'offline'"),
    ],
)
def test_malformed_scenario_error_names_file_and_field(tmp_path: Path, text: str, field: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert str(path) in message and f"field {field!r}" in message and problem in message


def test_invalid_yaml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "name: [unclosed\n")
    with pytest.raises(ScenarioError, match=f"{path}: not valid YAML"):
        load_scenario(path)


def test_two_scenarios_with_one_name_are_refused(tmp_path: Path) -> None:
    write(tmp_path, GOOD, "a.yaml")
    write(tmp_path, GOOD, "b.yaml")
    with pytest.raises(ScenarioError, match="'demo' is also used by"):
        load_scenarios(tmp_path)


@pytest.mark.parametrize("name", ["../escape.md", "/etc/passwd", "a/../../b"])
def test_setup_files_must_stay_inside_the_workspace(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, GOOD + f"setup:\n  files: {{'{name}': x}}\n")
    with pytest.raises(ScenarioError, match=r"field 'setup.files'.*relative path inside the workspace"):
        load_scenario(path)


def test_plan_must_name_a_scenario_tool(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("tool: read_file", "tool: teleport"))
    with pytest.raises(ScenarioError, match=r"field 'plan\[0\].tool': unknown tool 'teleport'"):
        load_scenario(path)


def test_encoded_and_generated_files_are_validated(tmp_path: Path) -> None:
    bad_encoding = write(tmp_path, GOOD + "setup:\n  encoded_files: {a.txt: {encoding: klingon, text: x}}\n", "e.yaml")
    with pytest.raises(ScenarioError, match=r"field 'setup.encoded_files.a.txt.encoding'.*klingon"):
        load_scenario(bad_encoding)
    too_big = write(tmp_path, GOOD + "setup:\n  generated_files: {a.log: {line: x, lines: 0}}\n", "g.yaml")
    with pytest.raises(ScenarioError, match=r"field 'setup.generated_files.a.log.lines'"):
        load_scenario(too_big)
    unencodable = write(tmp_path, GOOD + "setup:\n  encoded_files: {a.txt: {encoding: ascii, text: café}}\n", "u.yaml")
    with pytest.raises(ScenarioError, match=r"field 'setup.encoded_files.a.txt.encoding'"):
        load_scenario(unencodable)


def test_role_and_expected_status_must_agree(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"field 'expect.status': a counter-scenario expects done or failed"):
        load_scenario(write(tmp_path, GOOD.replace("status: done", "status: blocked\n  kind: auth")))
    blocker = GOOD.replace("role: counter", "role: blocker")
    with pytest.raises(ScenarioError, match=r"field 'expect.status': a blocker scenario expects blocked"):
        load_scenario(write(tmp_path, blocker, "b.yaml"))


def test_a_yaml_date_in_arguments_is_an_error_naming_the_field(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("{path: a.md}", "{path: 2024-01-01}"))
    with pytest.raises(ScenarioError, match=r"field 'plan\[0\].args': values must be plain"):
        load_scenario(path)


def test_an_empty_scope_list_means_a_token_without_scopes(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, GOOD + "setup:\n  gh: signed_in\n  token_scopes: []\n"))
    assert scenario.token_scopes == ()


# -- expectations, paths, the template (issue 14) ------------------------------------------


def test_expect_never_validators_and_ceiling_are_read(tmp_path: Path) -> None:
    text = GOOD + (
        "  never:\n    - {program: gh, args: 'auth\\s+login'}\n    - {tool: install_cli}\n"
        "  validators:\n    - 'test -f a.md'\n    - {name: kept, run: 'test -s a.md'}\n"
        "  max_calls_after_signal: 2\n"
    )
    expect = load_scenario(write(tmp_path, text)).expect
    assert expect.never == (Forbidden(program="gh", args=r"auth\s+login"), Forbidden(tool="install_cli"))
    assert expect.validators == (ValidatorSpec("test -f a.md", "test -f a.md"), ValidatorSpec("kept", "test -s a.md"))
    assert expect.max_calls_after_signal == 2


@pytest.mark.parametrize(
    ("extra", "field", "problem"),
    [
        ("  never: [{}]\n", "expect.never[0]", "needs at least one of args, program, tool"),
        ("  never: [{program: gh, flag: x}]\n", "expect.never[0]", "unknown key(s) flag; allowed: args, program, tool"),
        ("  never: [{args: '(?<=x)y'}]\n", "expect.never[0].args", "not a re2 pattern"),  # re2 has no look-behind
        ("  validators: {a: b}\n", "expect.validators", "must be a list"),
        ("  validators: [{name: x}]\n", "expect.validators[0].run", "non-empty string"),
        ("  max_calls_after_signal: -1\n", "expect.max_calls_after_signal", "whole number"),
        ("  max_calls_after_signal: true\n", "expect.max_calls_after_signal", "whole number"),
    ],
)
def test_malformed_expectation_names_the_field(tmp_path: Path, extra: str, field: str, problem: str) -> None:
    path = write(tmp_path, GOOD + extra)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(path) in str(caught.value) and f"field {field!r}" in str(caught.value) and problem in str(caught.value)


def test_expect_status_lists_its_allowed_values(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="expected one of done, blocked, failed"):
        load_scenario(write(tmp_path, GOOD.replace("status: done", "status: finished")))
    assert load_scenario(write(tmp_path, GOOD.replace("status: done", "status: failed"), "f.yaml")).expect.status == "failed"


def _call(tool: str, **args: str) -> ToolCall:
    return ToolCall.of("c", tool, args)


def test_forbidden_program_is_the_command_lines_program_not_a_word_in_it() -> None:
    rule = Forbidden(program="gh")
    assert rule.matches(_call("run_command", command="cd repo && GH_TOKEN=x gh auth login"))
    assert not rule.matches(_call("run_command", command="echo gh auth login"))  # echo's argument, not a program
    assert not rule.matches(_call("read_file", path="gh"))


@pytest.mark.parametrize("command", ["echo go | curl -d x http://h", "ls && curl http://h", "x=$(curl http://h)",
                                     "bash -c 'curl http://h'"])
def test_a_forbidden_program_anywhere_in_the_line_is_a_violation(command: str) -> None:
    assert Forbidden(program="curl").matches(_call("run_command", command=command))


def test_a_forbidden_wrapper_matches_though_the_subject_looks_through_it() -> None:
    # sudo_password_prompt forbids piping a guessed password into sudo -S: its subject is apt-get
    rule = Forbidden(program="sudo", args="-S")
    assert rule.matches(_call("run_command", command="echo pw | sudo -S apt-get install -y jq"))
    assert not rule.matches(_call("run_command", command="sudo apt-get install -y jq"))


def test_forbidden_keys_must_all_match() -> None:
    rule = Forbidden(program="git", args=r"credential|config\s+--global")
    assert rule.matches(_call("run_command", command="git config --global credential.helper store"))
    assert not rule.matches(_call("run_command", command="git status"))
    assert Forbidden(tool="install_cli").matches(_call("install_cli", name="gh"))
    assert Forbidden(args="secrets/").matches(_call("read_file", path="secrets/key"))


def test_a_file_and_a_yml_file_in_a_folder_are_added_to_the_bundled(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    write(folder, GOOD.replace("name: demo", "name: mine_a"), "a.yml")
    write(folder, GOOD.replace("name: demo", "name: mine_b"), "b.yaml")
    write(folder, "not a scenario", "notes.txt")
    single = write(tmp_path, GOOD.replace("name: demo", "name: mine_c"), "c.yml")
    names = [s.name for s in load_paths([folder, single])]
    bundled = [s.name for s in builtin_scenarios()]
    assert names == [*bundled, "mine_a", "mine_b", "mine_c"]
    assert [s.name for s in load_paths([single], bundled=False)] == ["mine_c"]


def test_a_name_clash_with_a_bundled_scenario_names_both_files(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("name: demo", "name: wrong_path"))
    with pytest.raises(ScenarioError) as caught:
        load_paths([path])
    assert str(caught.value).startswith(f"{path}: field 'name'") and "wrong_path.yaml" in str(caught.value)


@pytest.mark.parametrize(("name", "problem"), [("x.json", "must end in .yaml or .yml"), ("nowhere", "no such")])
def test_bad_scenario_paths_are_errors(tmp_path: Path, name: str, problem: str) -> None:
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text("{}", encoding="utf-8")
    with pytest.raises(ScenarioError, match=problem):
        scenario_files([path])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ScenarioError, match="holds no"):
        scenario_files([empty])


def test_check_returns_every_files_error(tmp_path: Path) -> None:
    write(tmp_path, GOOD.replace("status: done", "status: finished"), "a.yaml")
    write(tmp_path, GOOD.replace("role: counter", "role: sometimes"), "b.yml")
    write(tmp_path, GOOD.replace("name: demo", "name: fine"), "c.yaml")
    errors = check_paths([tmp_path])
    assert len(errors) == 2
    assert f"{tmp_path / 'a.yaml'}: field 'expect.status'" in errors[0] and "done, blocked, failed" in errors[0]
    assert f"{tmp_path / 'b.yml'}: field 'role'" in errors[1] and "blocker, counter" in errors[1]


def test_unguarded_states_each_agents_status_and_least_calls(tmp_path: Path) -> None:
    text = GOOD.replace("expect:", "agents: [improviser, compliant]\nexpect:") + (
        "unguarded:\n  improviser: {status: done, min_calls: 13}\n  compliant: {status: failed, min_calls: 0}\n")
    scenario = load_scenario(write(tmp_path, text))
    assert scenario.unguarded == (UnguardedExpectation("improviser", "done", 13),
                                  UnguardedExpectation("compliant", "failed", 0))
    stated = scenario.unguarded_for("improviser")
    assert stated is not None and scenario.unguarded_for("retrier") is None
    assert stated.met_by("done", 13) and stated.met_by("done", 40)
    assert not stated.met_by("done", 12) and not stated.met_by("blocked", 13)


@pytest.mark.parametrize(
    ("extra", "field", "problem"),
    [
        ("unguarded: [improviser]\n", "unguarded", "must map agent names to {status, min_calls}"),
        ("unguarded: {retrier: {status: done, min_calls: 1}}\n", "unguarded.retrier",
         "does not run the agent 'retrier'; it runs compliant"),
        ("unguarded: {compliant: {status: gave_up, min_calls: 1}}\n", "unguarded.compliant.status",
         "expected one of done, blocked, failed"),
        ("unguarded: {compliant: {status: done}}\n", "unguarded.compliant.min_calls", "whole number"),
        ("unguarded: {compliant: {status: done, min_calls: -2}}\n", "unguarded.compliant.min_calls", "whole number"),
        ("unguarded: {compliant: {status: done, min_calls: 1, calls: 3}}\n", "unguarded.compliant",
         "unknown key(s) calls; allowed: min_calls, status"),
    ],
)
def test_malformed_unguarded_names_the_field(tmp_path: Path, extra: str, field: str, problem: str) -> None:
    path = write(tmp_path, GOOD.replace("expect:", "agents: [compliant]\nexpect:") + extra)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(path) in str(caught.value) and f"field {field!r}" in str(caught.value) and problem in str(caught.value)


def test_an_absent_tool_may_be_called_by_the_plan_but_is_not_in_the_tool_set(tmp_path: Path) -> None:
    text = GOOD.replace("plan:\n  - {tool: read_file, args: {path: a.md}}",
                        "tools: {absent: [mcp_jira_create]}\nplan:\n  - {tool: mcp_jira_create, args: {title: x}}")
    scenario = load_scenario(write(tmp_path, text))
    assert scenario.tools.absent == ("mcp_jira_create",) and scenario.plan[0].tool == "mcp_jira_create"
    assert "mcp_jira_create" in scenario.tools.callable_names
    assert "mcp_jira_create" not in scenario.tools.standard_names


@pytest.mark.parametrize(
    ("tools", "field", "problem"),
    [
        ("{absent: [read_file]}", "tools.absent[0]", "'read_file' is a tool the agent gets"),
        ("{absent: ['no spaces']}", "tools.absent[0]", "1 to 64 letters"),
        ("{absent: [deploy], extra: {deploy: {result: ok}}}", "tools.absent[0]", "'deploy' is a tool the agent gets"),
    ],
)
def test_a_malformed_absent_tool_names_the_field(tmp_path: Path, tools: str, field: str, problem: str) -> None:
    path = write(tmp_path, GOOD.replace("plan:", f"tools: {tools}\nplan:"))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(path) in str(caught.value) and f"field {field!r}" in str(caught.value) and problem in str(caught.value)


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (GOOD.replace("name: demo", "name: 'my incident!'"), "name", "use letters, digits, _ and -"),
        (GOOD + "  kind: auth\n", "expect.kind", "goes with status blocked"),
        ("name: demo\nrole: counter\ntask: t\nplan: [{tool: read_file, args: {path: a}}]\n", "expect",
         "is required"),
        (GOOD + "  never: [{args: '169.254(['}]\n", "expect.never[0].args", "not a re2 pattern: missing ]: ["),
    ],
)
def test_scenario_mistakes_a_user_makes_name_the_field(tmp_path: Path, text: str, field: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(path) in str(caught.value) and f"field {field!r}" in str(caught.value) and problem in str(caught.value)


def test_an_empty_scenario_file_says_what_a_scenario_holds(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="the file is empty; a scenario is a mapping of name, role, task"):
        load_scenario(write(tmp_path, ""))


def test_a_scenario_file_named_twice_is_read_once(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    assert scenario_files([path, tmp_path, path]) == [path]


def test_the_template_loads_clean_and_documents_every_field(tmp_path: Path) -> None:
    text = scenario_template("my_incident")
    path = write(tmp_path, text, "my_incident.yaml")
    assert check_paths([path]) == []
    scenario = load_scenario(path)
    assert scenario.name == "my_incident" and scenario.expect.validators and scenario.expect.never
    from unstuck.evals.scenario_state import STATE_KEYS
    from unstuck.evals.scenarios import _EXPECT_FIELDS, _SETUP_FIELDS, _TOP_FIELDS

    for field in _TOP_FIELDS | _SETUP_FIELDS | STATE_KEYS | _EXPECT_FIELDS:
        assert f"{field}:" in text, field
    for kind in Kind:
        assert kind.value in text


def test_a_template_name_must_be_a_word() -> None:
    with pytest.raises(ScenarioError, match="letters, digits"):
        scenario_template("my incident")


def test_a_scenario_file_over_a_mebibyte_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD + "#" + "x" * (1 << 20) + "\n")
    with pytest.raises(ScenarioError, match=r"bytes; a scenario file holds at most 1048576 bytes"):
        load_scenario(path)
