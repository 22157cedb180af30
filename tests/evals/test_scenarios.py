from __future__ import annotations

from pathlib import Path

import pytest

from unstuck.evals.scenarios import (
    GhState,
    ScenarioError,
    ScenarioRole,
    builtin_scenarios,
    load_scenario,
    load_scenarios,
)
from unstuck.situations import Kind

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
    with pytest.raises(ScenarioError, match=r"field 'expect.status': a counter-scenario expects done"):
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
