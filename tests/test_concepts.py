"""The concept lexicon (unstuck.recognise.concepts, data/concepts.yaml): causes said in plain words.

Each text below is a program's or a vendor's own wording, quoted from the source the concept
names (not from ../shared/cases)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from unstuck.core.situations import Kind
from unstuck.recognise.classify import Stage, explain_output
from unstuck.recognise.concepts import ConceptError, load_lexicon, parse_lexicon, term_forms

DATA = Path(__file__).resolve().parents[1] / "src" / "unstuck" / "data" / "concepts.yaml"


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        # golang.org/x/term ReadPassword on a pipe; wrangler's non-interactive demand
        ("Error: failed to read the API token: inappropriate ioctl for device", "credential prompt without a terminal"),
        ("In a non-interactive environment, it's necessary to set a CLOUDFLARE_API_TOKEN environment variable",
         "credential prompt without a terminal"),
        # RFC 6238 / GitHub two-factor wording
        ("Two-factor authentication code required.", "one-time code not given"),
        # npm-registry-fetch errors.js: Unable to authenticate, need: %s (a WWW-Authenticate challenge)
        ('Unable to authenticate, need: Basic realm="Sonatype Nexus Repository Manager"',
         "credentials demanded by an HTTP realm"),
        # git credential.c / Linux-PAM
        ("fatal: Authentication failed for 'https://git.example.com/team/repo.git/'", "authentication failed"),
        ("su: Authentication failure", "authentication failed"),
        # Devise (GitLab, Gitea-like apps): You need to sign in or sign up before continuing.
        ("You need to sign in or sign up before continuing.", "sign-in required"),
        ("Authorisation required to view this resource.", "sign-in required"),
        ("Your session is over. Please log in again.", "sign-in required"),
        # agent hosts' own refusals of a tool call
        ("Permission to use Write has been denied.", "tool approval not granted"),
        ("User approval required to run this command.", "tool approval not granted"),
        # FlexNet; a British licence wording
        ("License checkout failed. License Manager Error -15", "licence missing or expired"),
        ("Your licence has expired.", "licence missing or expired"),
        # LiteLLM proxy budgets; Anthropic API
        ("Budget has been exceeded! Current cost: 10.2, Max budget: 10.0", "budget or credit exceeded"),
        ("Your credit balance is too low to access the Anthropic API.", "budget or credit exceeded"),
        # SQLite SQLITE_READONLY; PostgreSQL 25006; MySQL --read-only
        ("sqlite3.OperationalError: attempt to write a readonly database", "read-only database"),
        ("ERROR:  cannot execute INSERT in a read-only transaction", "read-only database"),
        ("The MySQL server is running with the --read-only option so it cannot execute this statement",
         "read-only database"),
        # apt, Go modules, npm
        ("E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/main/binary-amd64/Packages.xz  Hash Sum mismatch",
         "checksum mismatch"),
        ("verifying example.com/mod@v1.2.0: checksum mismatch", "checksum mismatch"),
        ("npm ERR! sha512-AbC== integrity checksum failed when using sha512", "checksum mismatch"),
        # NVML; Node.js native modules
        ("Failed to initialize NVML: Driver/library version mismatch", "version not installed"),
        ("was compiled against a different Node.js version using NODE_MODULE_VERSION 93", "version not installed"),
        # GitHub Actions, Azure Pipelines, CircleCI
        ("The job running on runner GitHub Actions 2 has exceeded the maximum execution time of 360 minutes.",
         "time limit exceeded"),
        ("The job running on agent Hosted Agent ran longer than the maximum time of 60 minutes.", "time limit exceeded"),
        ("Too long with no output (exceeded 10m0s): context deadline exceeded", "time limit exceeded"),
        # flyctl; libpq
        ("Error: failed to fetch an image or build from source: failed to start remote builder",
         "remote builder did not start"),
        ('connection to server at "db.internal" (10.0.0.5), port 5432 failed: server closed the connection',
         "connection failed"),
    ],
)
def test_a_cause_said_in_plain_words_is_its_concept(text: str, concept: str) -> None:
    found = load_lexicon().find(text.lower())
    assert found is not None and found.concept.name == concept


@pytest.mark.parametrize(
    "text",
    [
        "Login Succeeded",
        "Sign-in is not required for public repositories.",
        "The connection is established.",
        "Your monthly budget is 10 USD.",
        "Token budget exceeded per minute, retry after 20s",  # a rate limit with a reset, not a spent budget
        "✓ Logged in as octocat (keyring)",
        "Checksums verified.",
    ],
)
def test_a_success_or_a_term_without_its_negation_is_no_concept(text: str) -> None:
    assert load_lexicon().find(text.lower()) is None


def test_terms_carry_their_inflections_and_british_spellings() -> None:
    assert {"authorised", "authorisation", "authorized", "authorization"} <= set(term_forms("authorize"))
    assert {"licence", "license", "licensed", "licenced"} <= set(term_forms("licence"))
    assert {"sign-in", "signin", "signed in", "signing in"} <= set(term_forms("sign in"))
    assert {"authentication", "authenticated"} <= set(term_forms("authenticate"))
    assert set(term_forms("read only")) == {"read only", "read-only", "readonly"}
    assert term_forms("=not") == ("not",)


def test_a_concept_matches_within_one_sentence_only() -> None:
    lexicon = load_lexicon()
    assert lexicon.find("the database was opened. the backup is read-only.") is None
    assert lexicon.find("the database is read-only.") is not None


def test_every_group_of_the_bundled_lexicon_names_its_source() -> None:
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    assert len(data["concepts"]) >= 12
    for concept in data["concepts"]:
        assert concept["source"].strip()
        for group in concept["groups"]:
            assert group["source"].strip() and group["terms"], (concept["name"], group["name"])


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("concepts: [{name: x, kind: nope, source: s, groups: [{name: g, source: s, terms: [a]}]}]",
         r"concept 1 \(x\): unknown kind 'nope'"),
        ("concepts: [{name: x, kind: auth, groups: [{name: g, source: s, terms: [a]}]}]",
         r"concept 1 \(x\): source must be"),
        ("concepts: [{name: x, kind: auth, source: s, groups: [{name: g, source: s, terms: [Token]}]}]",
         r"concept 1 \(x\) group 1: term 'Token' has an upper-case letter"),
        ("concepts: [{name: x, kind: auth, source: s, groups: [{name: g, terms: [a]}]}]",
         r"concept 1 \(x\) group 1: source must be"),
        ("concepts: [{name: x, kind: auth, source: s, groups: []}]", r"groups must be a non-empty list"),
    ],
)
def test_a_malformed_concept_file_is_a_loud_error_naming_the_concept(text: str, error: str) -> None:
    with pytest.raises(ConceptError, match=error):
        parse_lexicon(text)


def test_a_failure_only_a_concept_explains_is_decided_at_the_concept_stage() -> None:
    found = explain_output("sqlite-tool", {}, "sqlite3.OperationalError: attempt to write a readonly database",
                           exit_code=1)
    assert found.situation is not None and found.situation.kind is Kind.PERMISSION
    assert found.decided_by is not None and found.decided_by.stage is Stage.CONCEPT
    assert "read-only database" in found.decided_by.rule and "readonly" in found.decided_by.rule
    assert any(e.what == "concept: read-only database" for e in found.evidence)


def test_a_status_decides_before_a_concept() -> None:
    # a 429 is a rate limit with a reset (retryable) even where the body says "budget exceeded"
    found = explain_output("llm", {}, "Budget has been exceeded for this minute", http_status=429)
    assert found.situation is not None and (found.situation.kind, found.situation.retryable) == (Kind.QUOTA, True)
    assert found.decided_by is not None and found.decided_by.stage is Stage.STATUS


def test_a_wording_row_decides_before_a_concept() -> None:
    found = explain_output("git", {}, "fatal: Authentication failed for 'https://git.example.com/r.git/'", exit_code=128)
    assert found.decided_by is not None and found.decided_by.stage is Stage.CAUSE


def test_a_concept_stated_without_any_status_is_a_failure() -> None:
    found = explain_output("agent", {}, "Permission to use Write has been denied.")
    assert found.failed and found.situation is not None
    assert (found.situation.kind, found.situation.interactive) == (Kind.PERMISSION, True)


def test_classify_explain_names_the_concept_and_its_words(tmp_path: Path) -> None:
    output = tmp_path / "out.txt"
    output.write_text("The job running on agent Hosted Agent ran longer than the maximum time of 60 minutes.\n",
                      encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "unstuck", "classify", "--explain", "--exit-code", "1", str(output)],
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "time limit exceeded" in done.stdout and "ran longer than" in done.stdout
