"""Harvesting the failure bank from real programs run in failure states on this machine."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from unstuck.core.situations import Kind
from unstuck.evals.harvest import PORT_PLACEHOLDER, RECIPES, HarvestReport, forms_from_cases, harvest
from unstuck.faults.bank import Channel, Family, load_bank
from unstuck.recognise.classify import classify_result


@pytest.fixture(scope="module")
def harvested() -> HarvestReport:
    return harvest()


def test_recipes_whose_program_is_here_all_produce_a_form(harvested: HarvestReport) -> None:
    produced = {form.id for form in harvested.forms}
    for recipe_id, reason in harvested.skipped:
        assert "not installed" in reason or "needs root" in reason, (recipe_id, reason)
    for recipe in RECIPES:
        if recipe.program == "python3" or shutil.which(recipe.program):
            assert recipe.id in produced or any(r == recipe.id for r, _ in harvested.skipped), recipe.id


def test_each_harvested_form_carries_the_label_of_its_state_and_the_classifier_agrees(
    harvested: HarvestReport,
) -> None:
    recipes = {r.id: r for r in RECIPES}
    for form in harvested.forms:
        recipe = recipes[form.id]
        assert (form.kind, form.transient, form.tools) == (recipe.kind, recipe.transient, recipe.tools)
        situation = classify_result(form.tools[0], {}, form.to_result(form.tools[0]))
        assert situation is not None and situation.kind is form.kind, (form.id, form.output)


def test_what_the_programs_printed_is_kept_word_for_word(harvested: HarvestReport) -> None:
    forms = {form.id: form for form in harvested.forms}
    logged_out = forms["gh-logged-out"]
    assert logged_out.exit_code == 4 and "gh auth login" in logged_out.output  # gh's documented exit 4: auth
    assert forms["shell-command-not-found"].exit_code == 127
    assert forms["shell-not-executable"].exit_code == 126
    assert forms["shell-timeout"].exit_code == 124  # timeout(1)'s documented status
    assert forms["shell-killed"].exit_code == 137  # 128 + SIGKILL
    assert "database is locked" in forms["sqlite-database-locked"].output
    assert "index.lock" in forms["git-index-lock"].output
    assert "could not read Username" in forms["git-http-auth"].output
    assert forms["python-permission-error"].exception_type == "PermissionError"
    rate = forms["github-api-403-rate-limit"]
    assert rate.channel is Channel.HTTP and rate.http_status == 403
    assert dict(rate.headers)["X-RateLimit-Remaining"] == "0"


def test_scratch_paths_and_picked_ports_become_placeholders(harvested: HarvestReport) -> None:
    for form in harvested.forms:
        assert "unstuck-harvest-" not in form.output and "unstuck-sandbox-" not in form.output, form.id
    refused = next(f for f in harvested.forms if f.id == "curl-refused")
    assert f"port {PORT_PLACEHOLDER}" in refused.output
    assert not re.search(r"127\.0\.0\.1:(?!54321)\d{4,5}", " ".join(f.output for f in harvested.forms))


def test_the_bundled_bank_has_a_form_for_every_recipe() -> None:
    bundled = {form.id for form in load_bank()}
    assert {recipe.id for recipe in RECIPES} <= bundled


def case_line(**fields: object) -> str:
    base = {"id": "c1", "source": "org/repo#1", "tool": "npm", "call": "npm i", "exit_code": 1, "http_status": None,
            "output": "npm ERR! code E401", "expected_kind": "auth", "interactive": True, "retryable": False}
    return json.dumps({**base, **fields}) + "\n"


def test_failure_cases_become_forms_with_their_report_as_provenance(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(
        case_line()
        + case_line(id="c2", tool="http", exit_code=None, http_status=429, expected_kind="quota", retryable=True)
        + case_line(id="c3", tool="mcp", exit_code=None, expected_kind="invalid_args")
        + case_line(id="c4", tool="aider", exit_code=None, expected_kind="network")
        + case_line(id="c5", expected_kind="ok")
        + case_line(id="c6", expected_kind="injected_instruction")
        + case_line(id="c7", expected_kind="truncated")
        + case_line(id="c8", tool="kubectl", http_status=403, expected_kind="permission"),
        encoding="utf-8",
    )
    forms = {f.id: f for f in forms_from_cases(path)}
    assert set(forms) == {"case-c1", "case-c2", "case-c3", "case-c4", "case-c8"}
    # a CLI that printed an HTTP error reached the agent as its output, not as an HTTP body
    assert (forms["case-c8"].channel, forms["case-c8"].tools) == (Channel.EXIT, ("kubectl",))
    assert (forms["case-c1"].channel, forms["case-c1"].family) == (Channel.EXIT, Family.AUTH_PERMISSION)
    assert forms["case-c1"].provenance.reference == "c1: org/repo#1"
    assert (forms["case-c2"].channel, forms["case-c2"].http_status, forms["case-c2"].transient) == (
        Channel.HTTP, 429, True)
    assert forms["case-c3"].channel is Channel.MCP
    assert (forms["case-c4"].exit_code, forms["case-c4"].kind) == (1, Kind.NETWORK)


@pytest.mark.parametrize(
    ("line", "named"),
    [('{"id": "c2"}\n', "not a case line"), (case_line(id="c2", expected_kind="authz"), "unknown expected_kind 'authz'"),
     (case_line(id="c2", exit_code="128"), "exit_code must be an integer")],
)
def test_a_broken_case_line_names_the_file_and_line(tmp_path: Path, line: str, named: str) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(case_line() + line, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"cases\.jsonl:2: {re.escape(named)}"):
        list(forms_from_cases(path))
