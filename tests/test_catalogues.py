"""unstuck.recognise.catalogues: program messages as patterns, harvested from the real catalogues here.

Expected values come from the rule (printf's directive syntax, the lead-line and literal-weight
rules in the module docstring) or from the program's own catalogue as GNU gettext's
``msgunfmt`` reads it, never from running the code under test and copying its output.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import bare_env
from unstuck.core.situations import Kind
from unstuck.recognise.catalogues import (
    DEFAULT_LOCALE_DIRS,
    MIN_LITERAL_WEIGHT,
    WILDCARD,
    MessageRow,
    Translation,
    bundled_patterns,
    catalogue_files,
    harvest,
    load_message_rows,
    load_translations,
    message_pattern,
    patterns_for,
    translations_jsonl,
)

LOCALE = DEFAULT_LOCALE_DIRS[0]


def row(msgid: str, *, domain: str = "test", kind: Kind | None = Kind.NOT_FOUND, subject_arg: int | None = None,
        harmless: bool = False) -> MessageRow:
    return MessageRow(domain, msgid, kind, False, False, False, harmless, subject_arg, "test")


def search(pattern: str, text: str) -> Any:
    return re2.compile(pattern).search(text.lower())


def subject(pattern: str, text: str) -> str | None:
    found = search(pattern, text)
    assert found is not None, f"{pattern!r} does not match {text!r}"
    captured: str | None = found.group(1)
    return captured


def msgunfmt_msgstr(mo: Path, msgid: str) -> str:
    """The msgstr of ``msgid`` as GNU gettext's own reader prints the catalogue."""
    printed = subprocess.run(["msgunfmt", "--no-wrap", str(mo)], capture_output=True, text=True, check=True).stdout
    c_msgid = json.dumps(msgid, ensure_ascii=False)
    lines = printed.splitlines()
    index = lines.index(f"msgid {c_msgid}")
    msgstr_line = lines[index + 1]
    assert msgstr_line.startswith("msgstr ")
    loaded: str = json.loads(msgstr_line[len("msgstr "):])
    return loaded


def catalogue(lang: str, domain: str) -> Path:
    files = catalogue_files(LOCALE / lang, domain)
    if not files:
        pytest.skip(f"no {domain} catalogue for {lang} on this machine")
    return files[0]


# --- message_pattern: directives ---------------------------------------------------------------


def test_string_and_number_directives_become_one_line_wildcards() -> None:
    assert message_pattern("cannot stat %s") == "cannot stat " + WILDCARD
    assert message_pattern("Sub-process %s returned an error code (%u)") == (
        "sub-process " + WILDCARD + " returned an error code \\(" + WILDCARD + "\\)")
    assert re2.compile(WILDCARD).fullmatch("any text, but 'one' line") is not None
    assert re2.compile(WILDCARD).fullmatch("two\nlines") is None


def test_length_modifiers_flags_widths_and_system_dependent_macros_are_one_directive() -> None:
    for directive in ("%lu", "%zu", "%lld", "%-10s", "%'d", "%5.2f", "%.*s", "%1$s", "%<PRIuMAX>", "%08lX", "%hhd"):
        assert message_pattern(f"took {directive} ms") == f"took {WILDCARD} ms", directive


def test_percent_percent_is_a_literal_percent() -> None:
    assert message_pattern("100%% done") == "100% done"
    # git prints this msgid through printf twice; once printed, "%%s" is the text "%s"
    assert message_pattern("would be overwritten by merge:\n%%s") == "would be overwritten by merge:\\r?\\n%s"


def test_a_percent_that_starts_no_directive_stays_literal_text() -> None:
    assert message_pattern("50%z off") == "50%z off"
    assert message_pattern("trailing %") == "trailing %"


def test_glibc_percent_m_is_a_wildcard_that_takes_no_argument() -> None:
    pattern = message_pattern('could not create directory "%s": %m', subject_arg=1)
    assert subject(pattern, 'initdb: error: could not create directory "/srv/pg": Permission denied') == "/srv/pg"


def test_n_directive_prints_nothing() -> None:
    assert message_pattern("wrote%n %d bytes") == f"wrote {WILDCARD} bytes"


def test_literal_text_is_lower_cased_and_regex_metacharacters_escaped() -> None:
    pattern = message_pattern("You have not concluded your merge (MERGE_HEAD exists).")
    assert pattern == "you have not concluded your merge \\(merge_head exists\\)\\."
    assert search(pattern, "error: You have not concluded your merge (MERGE_HEAD exists).")
    assert not search(pattern, "you have not concluded your merge xmerge_head existsy!")


def test_ellipsis_and_star_precision_match_gits_could_not_apply() -> None:
    pattern = message_pattern("Could not apply %s... %.*s")
    assert search(pattern, "error: could not apply 5d1e2a3... add the parser")
    assert not search(pattern, "error: could not apply 5d1e2a3 add the parser")


def test_control_characters_in_a_message_are_escaped_not_raw() -> None:
    pattern = message_pattern("\tIs the server running on that host and accepting TCP/IP connections?\n")
    assert pattern.startswith("is the server running")  # leading and trailing white space dropped
    assert "\\?" in pattern
    assert message_pattern("a\x01b") == "a\\x01b"


# --- message_pattern: the subject -------------------------------------------------------------


def test_subject_of_bash_command_not_found_is_the_missing_program() -> None:
    pattern = message_pattern("%s: command not found", subject_arg=1)
    assert subject(pattern, "bash: line 1: terraform: command not found") == "terraform"
    assert subject(pattern, "bash: terraform: command not found") == "terraform"


def test_subject_before_a_french_spaced_colon_is_still_the_program() -> None:
    pattern = message_pattern("%s : commande introuvable", subject_arg=1)
    assert subject(pattern, "bash: ligne 1: terraform : commande introuvable") == "terraform"


def test_subject_in_quotes_is_captured_without_them() -> None:
    pattern = message_pattern("pathspec '%s' did not match any file(s) known to git", subject_arg=1)
    assert subject(pattern, "error: pathspec 'src/main.py' did not match any file(s) known to git") == "src/main.py"


def test_subject_ending_the_message_stops_at_the_reason_error3_appends() -> None:
    pattern = message_pattern("cannot access %s", subject_arg=1)
    line = "ls: cannot access '/srv/my data/in.csv': No such file or directory"
    assert subject(pattern, line) == "/srv/my data/in.csv"
    assert subject(pattern, "mkdir: cannot access ‘/x’: Permission denied") == "/x"


def test_subject_ending_the_message_stops_before_apts_errno_suffix() -> None:
    pattern = message_pattern("Could not open lock file %s", subject_arg=1)
    line = "E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)"
    assert subject(pattern, line) == "/var/lib/dpkg/lock-frontend"


def test_subject_may_hold_a_colon_that_no_space_follows() -> None:
    pattern = message_pattern("unable to access '%s': %s", subject_arg=1)
    line = "fatal: unable to access 'https://example.invalid/r.git/': Could not resolve host"
    assert subject(pattern, line) == "https://example.invalid/r.git/"


def test_positional_directives_in_a_msgstr_capture_the_numbered_argument() -> None:
    # a translation may reorder arguments: %2$s converts argument 2 wherever it stands
    pattern = message_pattern("in %2$s: Konflikt (%1$s)", subject_arg=2)
    assert subject(pattern, "in lib/a.py: Konflikt (content)") == "lib/a.py"


def test_star_precision_takes_an_argument_of_its_own() -> None:
    # "%s... %.*s": argument 1 is the commit, 2 the precision (prints nothing), 3 the subject line
    assert subject(message_pattern("Could not apply %s... %.*s", subject_arg=3), "could not apply abc... fix it") == (
        "fix it")
    assert re2.compile(message_pattern("Could not apply %s... %.*s", subject_arg=2)).groups == 0


def test_a_subject_argument_that_no_directive_prints_gives_no_group() -> None:
    assert re2.compile(message_pattern("cannot stat %s", subject_arg=4)).groups == 0


# --- message_pattern: multi-line messages and quotes ----------------------------------------


def test_a_multi_line_msgid_matches_as_git_prints_it() -> None:
    msgid = ("Could not read from remote repository.\n\nPlease make sure you have the correct access rights\n"
             "and the repository exists.")
    printed = "fatal: " + msgid + "\n"
    pattern = message_pattern(msgid)
    assert search(pattern, printed)
    assert search(pattern, printed.replace("\n", "\r\n"))
    assert not search(pattern, printed.replace("\n", " "))


def test_curly_quotes_of_a_msgstr_are_kept_as_the_catalogue_has_them() -> None:
    pattern = message_pattern("%s: die Option „%s%s“ ist unbekannt\n", subject_arg=1)
    assert "„" in pattern and "“" in pattern
    assert search(pattern, "ls: die Option „--frob“ ist unbekannt")
    assert not search(pattern, "ls: die Option '--frob' ist unbekannt")


# --- patterns_for ---------------------------------------------------------------------------


def test_patterns_for_puts_the_msgid_first_and_ignores_other_messages() -> None:
    message = row("No such file or directory", domain="libc")
    translations = [
        Translation("libc", "No such file or directory", "fr", "Aucun fichier ou dossier de ce type"),
        Translation("libc", "No such file or directory", "de", "Datei oder Verzeichnis nicht gefunden"),
        Translation("libc", "Permission denied", "de", "Keine Berechtigung"),
        Translation("coreutils", "No such file or directory", "de", "Nicht da, woanders gesucht"),
    ]
    assert patterns_for(message, translations) == (
        "no such file or directory", "datei oder verzeichnis nicht gefunden", "aucun fichier ou dossier de ce type")


def test_a_translation_with_too_little_literal_text_is_skipped() -> None:
    message = row("%s: %s: bad interpreter", domain="bash", subject_arg=2)
    translations = [
        Translation("bash", message.msgid, "xx", "%s: %s: ?"),  # nothing but punctuation
        Translation("bash", message.msgid, "yy", "%s: %s: böse"),  # 4 letters
    ]
    assert patterns_for(message, translations) == (message_pattern(message.msgid, subject_arg=2),)


def test_wide_characters_count_double_toward_the_literal_minimum() -> None:
    # "权限不够" is four CJK characters: weight 8, as much text as "Permission" on screen
    assert MIN_LITERAL_WEIGHT == 8
    message = row("Permission denied", domain="libc", kind=Kind.PERMISSION)
    found = patterns_for(message, [Translation("libc", "Permission denied", "zh_CN", "权限不够"),
                                   Translation("libc", "Permission denied", "ja", "拒否")])
    assert found == ("permission denied", "权限不够")


def test_a_translation_that_converts_an_argument_the_msgid_does_not_is_skipped() -> None:
    message = row("cannot access %s", domain="coreutils", subject_arg=1)
    broken = Translation("coreutils", "cannot access %s", "xx", "Zugriff auf %s nicht möglich: %s")
    assert patterns_for(message, [broken]) == (message_pattern("cannot access %s", subject_arg=1),)


def test_identical_translations_give_one_pattern() -> None:
    message = row("Already up to date.", domain="git", kind=None, harmless=True)
    same = [Translation("git", "Already up to date.", lang, "Already up to date.") for lang in ("en_GB", "en_CA")]
    assert patterns_for(message, same) == ("already up to date\\.",)


def test_a_multi_line_message_is_matched_by_its_lead_line_despite_gits_hint_prefixes() -> None:
    msgid = ("Updates were rejected because the remote contains work that you do\nnot have locally. This is usually"
             " caused by another repository pushing\nto the same ref.")
    printed = ("hint: Updates were rejected because the remote contains work that you do\n"
               "hint: not have locally. This is usually caused by another repository pushing\nhint: to the same ref.")
    (english,) = patterns_for(row(msgid, domain="git", kind=Kind.CONFLICT), [])
    assert search(english, printed)
    assert not search(message_pattern(msgid), printed)  # the whole message does not match: "hint: " interrupts it


def test_each_rows_patterns_joined_stay_small_enough_for_re2s_dfa() -> None:
    # re2 falls back from its DFA to its much slower NFA when a program outgrows its memory
    # budget (8 MiB by default); a few thousand instructions per row keeps every search linear
    # and fast, however many languages a row has.
    for message, patterns in bundled_patterns():
        joined = re2.compile("|".join(f"(?:{p})" for p in patterns))
        assert joined.programsize < 20_000, (message.msgid, joined.programsize)


def test_cached_bundled_patterns_are_the_derivation_of_the_bundled_data() -> None:
    from unstuck.recognise.catalogues import derive_patterns, load_message_rows, load_translations

    assert bundled_patterns() == derive_patterns(load_message_rows(), load_translations())


def test_a_damaged_pattern_cache_is_derived_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unstuck.core.cache import CACHE_DIR_ENV
    from unstuck.recognise import catalogues

    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    catalogues.bundled_patterns.cache_clear()
    try:
        first = catalogues.bundled_patterns()
        stored = tmp_path / "message-patterns.json"
        body = json.loads(stored.read_text(encoding="utf-8"))
        body["value"][0] = []  # a row without patterns: not well formed
        stored.write_text(json.dumps(body), encoding="utf-8")
        catalogues.bundled_patterns.cache_clear()
        assert catalogues.bundled_patterns() == first
        stored.write_text(json.dumps(body)[: len(json.dumps(body)) // 2], encoding="utf-8")  # truncated
        catalogues.bundled_patterns.cache_clear()
        assert catalogues.bundled_patterns() == first
    finally:
        catalogues.bundled_patterns.cache_clear()


def test_every_bundled_pattern_compiles_under_re2_and_python_re_and_is_lower_case() -> None:
    escapes = re.compile(r"\\.")
    for message, patterns in bundled_patterns():
        assert patterns, message
        for pattern in patterns:
            re2.compile(pattern)
            re.compile(pattern)
            assert not any(ch.isupper() for ch in escapes.sub("", pattern)), (message.msgid, pattern)


# --- harvest, from the catalogues installed on this machine -----------------------------------


@pytest.mark.parametrize(("lang", "domain", "msgid"), [
    ("de", "libc", "Permission denied"),
    ("zh_CN", "libc", "No such file or directory"),
    ("fr", "git", "not a git repository (or any of the parent directories): %s"),
    ("es", "bash", "%s: command not found"),
    ("de", "libapt-pkg6.0", "Unable to locate package %s"),
])
def test_harvest_reads_the_msgstr_gettext_itself_reads(lang: str, domain: str, msgid: str) -> None:
    if shutil.which("msgunfmt") is None:
        pytest.skip("GNU gettext's msgunfmt is not installed")
    mo = catalogue(lang, domain)
    message = row(msgid, domain=domain)
    found = [t for t in harvest([message], [LOCALE]) if t.lang == lang]
    assert found == [Translation(domain, msgid, lang, msgunfmt_msgstr(mo, msgid))]


def test_harvest_finds_postgresqls_versioned_domains_under_their_plain_name() -> None:
    versioned = sorted((LOCALE / "de" / "LC_MESSAGES").glob("libpq5-*.mo"))
    if not versioned:
        pytest.skip("no PostgreSQL client catalogue for de on this machine")
    message = row('could not translate host name "%s" to address: %s\n', domain="libpq5", subject_arg=1)
    found = harvest([message], [LOCALE])
    assert any(t.lang == "de" and t.domain == "libpq5" for t in found)
    assert catalogue_files(LOCALE / "de", "libpq5") == tuple(versioned)


def test_the_harvested_german_message_is_what_the_real_program_prints(tmp_path: Path) -> None:
    catalogue("de", "libc")
    found = {t.lang: t.msgstr for t in harvest([row("No such file or directory", domain="libc")], [LOCALE])}
    printed = subprocess.run(["cat", str(tmp_path / "absent")], capture_output=True, text=True,
                             env=bare_env(LANG="C.UTF-8", LANGUAGE="de"))
    assert printed.stderr.rstrip().endswith(found["de"])


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="GNU gettext's msgfmt is not installed")
def test_harvest_reads_plural_forms_and_contexts_and_leaves_out_fuzzy_entries(tmp_path: Path) -> None:
    folder = tmp_path / "xx" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    po = folder / "demo.po"
    po.write_text(
        'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n'
        '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n'
        'msgid "%d file left"\nmsgid_plural "%d files left"\nmsgstr[0] "%d Datei übrig"\nmsgstr[1] "%d Dateien übrig"\n\n'
        'msgctxt "network"\nmsgid "Connection lost"\nmsgstr "Verbindung verloren"\n\n'
        '#, fuzzy\nmsgid "Disk is full"\nmsgstr "Platte voll (ungeprüft)"\n\n'
        'msgid "Never translated"\nmsgstr ""\n',
        encoding="utf-8")
    subprocess.run(["msgfmt", "-o", str(folder / "demo.mo"), str(po)], check=True)
    rows = [row(m, domain="demo") for m in ("%d files left", "Connection lost", "Disk is full", "Never translated")]
    assert harvest(rows, [tmp_path]) == (
        Translation("demo", "%d files left", "xx", "%d Datei übrig"),
        Translation("demo", "%d files left", "xx", "%d Dateien übrig"),
        Translation("demo", "Connection lost", "xx", "Verbindung verloren"),
    )


def test_harvest_names_a_catalogue_it_cannot_read(tmp_path: Path) -> None:
    broken = tmp_path / "xx" / "LC_MESSAGES" / "demo.mo"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a catalogue at all")
    with pytest.raises(ValueError, match=r"demo\.mo: not a readable gettext catalogue"):
        harvest([row("Anything at all", domain="demo")], [tmp_path])


def test_harvest_skips_a_locale_directory_that_does_not_exist(tmp_path: Path) -> None:
    assert harvest([row("Permission denied", domain="libc")], [tmp_path / "nowhere"]) == ()


# --- the bundled data -------------------------------------------------------------------------


def test_every_bundled_row_names_a_source_and_a_verdict() -> None:
    rows = load_message_rows()
    assert len(rows) >= 150
    for message in rows:
        assert message.source.strip()
        assert (message.kind is None) == message.harmless
    domains = {m.domain for m in rows}
    assert {"libc", "bash", "coreutils", "git", "libapt-pkg6.0"} <= domains


def test_shipped_translations_belong_to_bundled_rows_and_cover_german() -> None:
    keys = {(m.domain, m.msgid) for m in load_message_rows()}
    shipped = load_translations()
    assert {(t.domain, t.msgid) for t in shipped} <= keys
    assert ("libc", "Permission denied", "de") in {(t.domain, t.msgid, t.lang) for t in shipped}


def test_translations_round_trip_through_json_lines() -> None:
    sample = (Translation("libc", "Permission denied", "zh_CN", "权限不够"),
              Translation("git", "Already up to date.", "de", "Bereits aktuell.\n"))
    assert load_translations(translations_jsonl(sample)) == sample


# --- loaders reject malformed rows, naming file, line and field --------------------------------

GOOD = '  - {domain: libc, msgid: "Permission denied", kind: permission, source: "glibc errlist.h"}\n'


@pytest.mark.parametrize(("bad_row", "field", "problem"), [
    ('  - {domain: libc, msgid: "Disk quota exceeded", kind: full, source: "x"}\n', "kind", "unknown or missing kind"),
    ('  - {domain: libc, msgid: "Disk quota exceeded", source: "x"}\n', "kind", "unknown or missing kind"),
    ('  - {domain: libc, msgid: "Disk quota exceeded", kind: quota}\n', "source", "non-empty string"),
    ('  - {domain: libc, msgid: "Disk quota exceeded", kind: quota, source: x, weight: 3}\n', "weight", "unknown field"),
    ('  - {domain: libc, msgid: "Disk quota exceeded", kind: quota, source: x, retryable: "yes"}\n', "retryable",
     "true or false"),
    ('  - {domain: git, msgid: "Already up to date.", kind: conflict, harmless: true, source: x}\n', "kind",
     "harmless row has no kind"),
    ('  - {domain: git, msgid: "cannot stat %s", kind: not_found, subject_arg: 2, source: x}\n', "subject_arg",
     "argument 2 is not printed"),
    ('  - {domain: git, msgid: "cannot stat %s", kind: not_found, subject_arg: 0, source: x}\n', "subject_arg",
     "1-based"),
    ('  - {domain: bash, msgid: "%s: %s", kind: execution_error, source: x}\n', "msgid", "literal text"),
    ('  - {domain: ../etc, msgid: "Disk quota exceeded", kind: quota, source: x}\n', "domain", "not a path"),
    (GOOD, "msgid", "repeats the row on line 2"),
])
def test_message_loader_names_file_line_row_and_field(bad_row: str, field: str, problem: str) -> None:
    text = "messages:\n" + GOOD + bad_row
    with pytest.raises(ValueError, match=re.escape(f"mine.yaml line 3 (row 2): {field}: ") + ".*" + re.escape(problem)):
        load_message_rows(text, where="mine.yaml")


def test_message_loader_rejects_text_that_is_not_yaml_or_has_no_messages_list() -> None:
    with pytest.raises(ValueError, match="mine.yaml: not valid YAML"):
        load_message_rows("messages: [unclosed\n", where="mine.yaml")
    with pytest.raises(ValueError, match="mine.yaml: expected a mapping with a 'messages' list"):
        load_message_rows("- just a list\n", where="mine.yaml")


def test_message_loader_reads_a_valid_row_with_every_field() -> None:
    text = ("messages:\n  - {domain: apt, msgid: \"Temporary failure resolving '%s'\", kind: network,"
            " retryable: true, weak: true, interactive: false, subject_arg: 1, source: apt methods/connect.cc}\n")
    assert load_message_rows(text) == (MessageRow(
        "apt", "Temporary failure resolving '%s'", Kind.NETWORK, False, True, True, False, 1, "apt methods/connect.cc"),)


@pytest.mark.parametrize(("line", "problem"), [
    ("{not json", "not JSON"),
    ('["a", "list"]', "expected an object"),
    ('{"domain": "libc", "msgid": "x", "lang": "de"}', "msgstr: must be a non-empty string"),
    ('{"domain": "libc", "msgid": "x", "lang": "de", "msgstr": "y", "extra": 1}', "extra: unknown field"),
])
def test_translation_loader_names_file_and_line(line: str, problem: str) -> None:
    good = '{"domain": "libc", "msgid": "x", "lang": "de", "msgstr": "y"}'
    with pytest.raises(ValueError, match=re.escape(f"mine.jsonl line 3: {problem}")):
        load_translations(good + "\n\n" + line + "\n", where="mine.jsonl")


# --- properties ----------------------------------------------------------------------------

PRINTF_ALPHABET = st.sampled_from([*"%sdcum$*.0123456789-'l<>PRIu64zZ \n\t:;,'\"„“«»()[]abcXYZ", "%s", "%d", "%1$s",
                                   "%.*s", "%<PRIu64>", "%%", "İ", "ß", "权", "\u00a0", "\\"])


@settings(max_examples=300, deadline=None)
@given(message=st.one_of(st.text(), st.lists(PRINTF_ALPHABET, max_size=40).map("".join)),
       subject_arg=st.one_of(st.none(), st.integers(min_value=1, max_value=4)))
def test_message_pattern_never_raises_and_always_compiles(message: str, subject_arg: int | None) -> None:
    pattern = message_pattern(message, subject_arg=subject_arg)
    compiled = re2.compile(pattern)
    re.compile(pattern)
    assert compiled.groups <= 1


@settings(max_examples=200, deadline=None)
@given(message=st.text(st.characters(exclude_characters="%", codec="utf-8")))
def test_a_message_without_directives_matches_itself(message: str) -> None:
    assert re2.compile(message_pattern(message)).search(message.strip().lower()) is not None


WORD = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789/._-"), min_size=1, max_size=20).filter(
    lambda w: w[0] not in "-" and w[-1] not in "-")


@settings(max_examples=200, deadline=None)
@given(before=st.sampled_from(["cannot open ", "error: ", "", "konnte "]),
       after=st.sampled_from([": file not found", "' is missing", " for reading", ": ", ""]),
       value=WORD, other=WORD)
def test_a_printed_message_is_matched_and_its_subject_captured(before: str, after: str, value: str, other: str) -> None:
    quote = "'" if after.startswith("'") else ""
    msgid = f"{before}{quote}%s{after} (%d)" if after else f"{before}%s"
    printed = msgid.replace("%s", value, 1).replace("%d", other)
    pattern = message_pattern(msgid, subject_arg=1)
    found = re2.compile(pattern).search(f"prog: {printed}".lower())
    assert found is not None
    if before or quote:
        assert found.group(1) == value


# --- unstuck signals harvest --------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="GNU gettext's msgfmt is not installed")
def test_signals_harvest_writes_what_the_catalogues_hold_and_names_the_msgids_none_has(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from unstuck.cli.signals import signals_app

    folder = tmp_path / "locale" / "de" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    po = folder / "libc.po"
    po.write_text('msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                  'msgid "Permission denied"\nmsgstr "Keine Berechtigung"\n', encoding="utf-8")
    subprocess.run(["msgfmt", "-o", str(folder / "libc.mo"), str(po)], check=True)
    out = tmp_path / "translations.jsonl"
    result = CliRunner().invoke(signals_app, ["harvest", "--locale-dir", str(tmp_path / "locale"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert load_translations(out.read_text(encoding="utf-8")) == (
        Translation("libc", "Permission denied", "de", "Keine Berechtigung"),)
    rows = load_message_rows()
    assert f"found 1 of {len(rows)} msgids in 1 languages" in result.output
    assert f"{len(rows) - 1} msgids no installed catalogue has" in result.output
    assert "git: 'Already up to date.'" in result.output


def test_signals_harvest_refuses_a_locale_dir_that_does_not_exist(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from unstuck.cli.signals import signals_app

    result = CliRunner().invoke(signals_app, ["harvest", "--locale-dir", str(tmp_path / "nowhere"),
                                              "--out", str(tmp_path / "t.jsonl")])
    assert result.exit_code == 2
    assert not (tmp_path / "t.jsonl").exists()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_literal_weight_counts_letters_and_digits_and_wide_ones_twice(text: str) -> None:
    import unicodedata

    from unstuck.recognise.catalogues import _weight

    expected = sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text if ch.isalnum())
    assert _weight([text]) == expected
    assert _weight(["日本語のテキスト", "abc1"]) == 16 + 4


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_escaped_literal_text_matches_itself_and_only_itself(text: str) -> None:
    from unstuck.recognise.catalogues import _escape

    pattern = _escape(text)
    assert re2.compile(pattern).fullmatch(text) is not None
    assert re2.compile(pattern).fullmatch(text + "x") is None
    assert all(ord(ch) >= 0x20 and ord(ch) != 0x7F for ch in pattern)  # control characters written as escapes
    assert _escape("a\ud800b") == "a\ufffdb"  # a lone surrogate: what decoding its UTF-8 gives
