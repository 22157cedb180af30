"""The lesson store: what it keeps, what it refuses, and what survives several processes.

Tests of store semantics take ``store_target`` (tests/pg_fixtures.py) and run once on a fresh
SQLite file and once on a fresh PostgreSQL database; tests of what only a file has (PRAGMAs,
``quick_check``, a file replaced or read-only, FTS5 internals, query plans, ``.bak`` copies of
migrations) stay on SQLite."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_at_once
from pg_fixtures import StoreTarget
from unstuck.lessons import (
    ACTIVE_BY_TOOL_SQL,
    ACTIVE_SQL,
    APPLICATION_ID,
    CONTENT_LIMIT,
    LessonStore,
    LessonStoreError,
    default_store_path,
    storable,
)
from unstuck.remember import LessonKeeper
from unstuck.situations import Kind, Probe, Situation, Source
from unstuck.stores import Engine

LOGGED_OUT = Situation(Kind.AUTH, "gh", interactive=True, unblock="gh auth login",
                       probe=Probe.of("check_cli_setup", {"name": "gh"}), detail="You are not logged into any GitHub hosts.")
FP = "/usr/bin/gh|gh version 2.23.0 (2023-02-14)"


def record(store: LessonStore, situation: Situation = LOGGED_OUT, fingerprint: str = FP) -> int:
    return store.record(situation, tool="check_cli_setup", fingerprint=fingerprint, content="gh was logged out",
                        source="escalated").id


def test_a_new_store_is_marked_wal_and_holds_the_knowledge_table(tmp_path: Path) -> None:
    path = tmp_path / "lessons.db"
    LessonStore(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        columns = [row[1] for row in db.execute("PRAGMA table_info(knowledge)")]
    assert columns == ["id", "domain", "tool", "subject", "kind", "fingerprint", "unblock", "probe", "content",
                       "confidence", "created_at", "last_verified_at", "invalidated_at", "superseded_by", "source",
                       "metadata", "host"]


def test_the_default_path_is_in_the_user_data_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_store_path() == tmp_path / "data" / "unstuck" / "lessons.db"
    with LessonStore() as store:
        assert store.path == tmp_path / "data" / "unstuck" / "lessons.db" and store.path.exists()


def test_a_lesson_keeps_its_signature_unblock_and_probe(store_target: StoreTarget) -> None:
    with LessonStore(store_target.url) as store:
        lesson = store.get(record(store))
        assert lesson is not None and lesson.active
        assert (lesson.signature.tool, lesson.signature.subject, lesson.signature.kind, lesson.signature.fingerprint) == (
            "check_cli_setup", "gh", Kind.AUTH, FP)
        assert lesson.unblock == "gh auth login" and lesson.probe == LOGGED_OUT.probe


def test_the_same_blocker_again_is_reverified_not_duplicated(store_target: StoreTarget) -> None:
    with LessonStore(store_target.url) as store:
        first = record(store)
        before = store.get(first)
        again = store.record(LOGGED_OUT, tool="check_cli_setup", fingerprint=FP, content="x", source="escalated",
                             now_s=(before.last_verified_at if before else 0) + 60)
        assert again.id == first and len(store.all()) == 1
        assert before is not None and again.last_verified_at == before.last_verified_at + 60
        assert again.confidence > before.confidence


def test_a_new_unblock_supersedes_the_old_lesson_which_keeps_its_row(store_target: StoreTarget) -> None:
    with LessonStore(store_target.url) as store:
        first = record(store)
        scoped = Situation(Kind.AUTH, "gh", unblock="gh auth login --scopes read:org")
        second = record(store, scoped)
        old = store.get(first)
        assert old is not None and old.superseded_by == second and not old.active
        assert [lesson.id for lesson in store.active()] == [second]


@pytest.mark.parametrize(
    ("situation", "why"),
    [
        (Situation(Kind.NETWORK, "api.github.com", retryable=True), "network kinds are never stored"),
        (Situation(Kind.AUTH, "gh", source=Source.INFERRED), "only declared situations"),
        (Situation(Kind.TIMEOUT, "gh", retryable=True), "not a blocker kind"),
        (Situation(Kind.QUOTA, "api", retryable=True), "not a blocker kind"),
    ],
)
def test_what_is_never_stored(store_target: StoreTarget, situation: Situation, why: str) -> None:
    assert why in (storable(situation) or "")
    with LessonStore(store_target.url) as store, pytest.raises(ValueError, match=why):
        record(store, situation)
    assert storable(LOGGED_OUT) is None
    assert store_target.rows("SELECT count(*) FROM knowledge") == [(0,)]


def test_a_changed_fingerprint_stops_a_match(store_target: StoreTarget) -> None:
    with LessonStore(store_target.url) as store:
        lesson_id = record(store)
        assert store.match("gh", FP) is not None and store.match("gh", FP).id == lesson_id  # type: ignore[union-attr]
        assert store.match("gh", "/usr/local/bin/gh|gh version 2.60.0 (2024-10-01)") is None


def test_invalidating_closes_and_keeps_the_row_and_why(store_target: StoreTarget) -> None:
    with LessonStore(store_target.url) as store:
        lesson_id = record(store)
        assert store.invalidate(lesson_id, "its probe came back clean")
        assert not store.invalidate(lesson_id, "again")
        kept = store.get(lesson_id)
        assert kept is not None and kept.invalidated_at is not None
        assert kept.metadata["invalidated_because"] == "its probe came back clean"
        assert store.match("gh", FP) is None and store.active() == [] and len(store.all()) == 1


def test_full_text_search_finds_lessons_by_their_words(store_target: StoreTarget) -> None:
    with LessonStore(store_target.url) as store:
        gh = record(store)
        npm = store.record(Situation(Kind.AUTH, "npm", unblock="npm login"), tool="run_command", fingerprint="",
                           content="npm registry said E401 Unable to authenticate", source="escalated").id
        assert [lesson.id for lesson in store.search("authenticate")] == [npm]
        assert [lesson.id for lesson in store.search("logged out")] == [gh]
        assert store.search('"; DROP TABLE knowledge; --') == []  # words are quoted, never query syntax


def test_another_programs_database_is_refused_and_never_recreated(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    before = path.read_bytes()
    with pytest.raises(LessonStoreError, match=r"app\.db is another program's database"):
        LessonStore(path)
    assert path.read_bytes() == before


def test_a_corrupt_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "lessons.db"
    path.write_bytes(os.urandom(8192))
    before = path.read_bytes()
    with pytest.raises(LessonStoreError, match=str(path)):
        LessonStore(path)
    assert path.read_bytes() == before


WRITER = """
import sys
from unstuck.lessons import LessonStore
from unstuck.situations import Kind, Situation
with LessonStore(sys.argv[1]) as store:
    for i in range(int(sys.argv[3])):
        store.record(Situation(Kind.NOT_INSTALLED, f"{sys.argv[2]}-{i}", unblock=f"apt install {sys.argv[2]}-{i}"),
                     tool="check_cli_setup", fingerprint="", content=f"{sys.argv[2]} {i} missing", source="escalated")
print("done")
"""


def test_two_processes_writing_at_once_lose_nothing(store_target: StoreTarget) -> None:
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, store_target.url, name, "150"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for name in ("alpha", "beta")]
    outputs = [w.communicate(timeout=120) for w in writers]
    assert all(w.returncode == 0 for w in writers), outputs
    with LessonStore(store_target.url) as store:
        subjects = {lesson.signature.subject for lesson in store.all()}
    assert subjects == {f"{name}-{i}" for name in ("alpha", "beta") for i in range(150)}
    assert json.loads(json.dumps(len(subjects))) == 300


def test_processes_making_one_new_store_at_once_all_write(store_target: StoreTarget,
                                                          tmp_path: Path) -> None:
    # three new files; one new database (its fixture makes one per test)
    targets = [f"sqlite://{tmp_path}/fresh-{trial}.db" for trial in range(3)] \
        if store_target.engine is Engine.SQLITE else [store_target.url]
    for target in targets:
        writers = [subprocess.Popen([sys.executable, "-c", WRITER, target, f"w{n}", "40"], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for n in range(6)]
        outputs = [w.communicate(timeout=120) for w in writers]
        assert all(w.returncode == 0 for w in writers), outputs
        with LessonStore(target) as store:
            assert len(store.all()) == 240


def test_a_read_only_store_can_be_read(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with LessonStore(path) as store:
        record(store)
    path.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        with LessonStore(path, readonly=True) as store:
            assert [lesson.signature.subject for lesson in store.active()] == ["gh"]
    finally:
        tmp_path.chmod(0o755)
        path.chmod(0o644)


def test_an_empty_database_of_another_program_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 7")
    with pytest.raises(LessonStoreError, match="another program's database"):
        LessonStore(path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def test_a_multi_line_unblock_recorded_again_is_reverified_not_superseded(
        store_target: StoreTarget) -> None:
    situation = Situation(Kind.AUTH, "gh", unblock="gh auth login\nthen gh auth refresh -s read:org")
    with LessonStore(store_target.url) as store:
        first, again = record(store, situation), record(store, situation)
        assert first == again and len(store.all()) == 1


def test_a_damaged_store_is_refused_at_open_and_left_byte_for_byte(tmp_path: Path) -> None:
    from test_sqlite_store import damage_page

    path = tmp_path / "lessons.db"
    with LessonStore(path) as store:
        for n in range(40):  # enough rows for the knowledge table to span several pages
            record(store, fingerprint=f"/usr/bin/gh|gh version 2.{n}.0")
    damage_page(path, "knowledge")
    before = path.read_bytes()
    with pytest.raises(LessonStoreError, match=r"lessons\.db is damaged \(PRAGMA quick_check: .+\)"):
        LessonStore(path)
    assert path.read_bytes() == before


def test_a_store_replaced_while_open_refuses_the_write_and_keeps_the_failure(tmp_path: Path) -> None:
    path = tmp_path / "lessons.db"
    with LessonStore(path) as store:
        record(store)
        LessonStore(tmp_path / "other.db").close()
        os.replace(tmp_path / "other.db", path)  # another process put a new store in its place
        with pytest.raises(LessonStoreError, match="replaced during the run") as caught:
            record(store, fingerprint="/usr/bin/gh|gh version 2.24.0")
        assert str(path) in str(caught.value) and "now names another file" in str(caught.value)
        assert store.failures == [str(caught.value)]  # kept once, though record() calls other methods


def test_unstuck_run_reports_a_lesson_store_that_refuses_writes_and_fails(tmp_path: Path) -> None:
    path = tmp_path / "lessons.db"
    LessonStore(path).close()
    with sqlite3.connect(path) as db:  # every lesson write now fails in its FTS trigger (sqlite.org, "FTS5", 4.4.3)
        db.execute("DROP TABLE knowledge_fts")
    db.close()
    proc = subprocess.run([sys.executable, "-m", "unstuck", "run", "gh_logged_out", "--agent", "improviser",
                           "--unattended", "--lessons", str(path)], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 3  # blocked, as the scenario is: the lesson error is reported besides
    assert "error: --lessons: LessonStore.record on" in proc.stderr and "no such table" in proc.stderr


def test_the_turn_start_query_seeks_the_active_tool_index_and_never_scans_or_sorts(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    LessonStore(path).close()
    with sqlite3.connect(path) as db:
        plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {ACTIVE_BY_TOOL_SQL}", ("check_cli_setup", 20))]
        recent = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {ACTIVE_SQL}", (20,))]
    assert plan == ["SEARCH knowledge USING INDEX knowledge_active_tool (tool=?)"]
    assert recent == ["SCAN knowledge USING INDEX knowledge_active_recent"]  # in index order: no TEMP B-TREE


def test_active_lessons_of_several_tools_come_most_recently_verified_first_and_closed_ones_never(
        store_target: StoreTarget) -> None:
    with LessonStore(store_target.url) as store:
        made = []
        for i, (tool, at) in enumerate([("a", 10.0), ("b", 30.0), ("a", 20.0), ("c", 40.0), ("b", 20.0)]):
            made.append(store.record(Situation(Kind.AUTH, f"s{i}", source=Source.DECLARED), tool=tool,
                                     fingerprint=FP, content="c", source="escalated", now_s=at).id)
        store.invalidate(made[1], "gone")
        assert [x.id for x in store.active(tools=["a", "b"])] == [made[4], made[2], made[0]]  # 20 (newer id), 20, 10
        assert [x.id for x in store.active(tools=["b", "a", "a"], limit=2)] == [made[4], made[2]]
        assert [x.id for x in store.active()] == [made[3], made[4], made[2], made[0]]
        assert store.active(tools=[]) == [] and store.active(tools=["a"], limit=0) == []
        with pytest.raises(ValueError, match="limit"):
            store.active(limit=-1)


def test_a_schema_1_store_is_migrated_in_place_keeping_a_backup_and_every_lesson(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with LessonStore(path) as store:
        kept = record(store)
    with sqlite3.connect(path) as db:  # schema 1: the same file without the indexes schema 2 added
        db.execute("DROP INDEX knowledge_active_tool")
        db.execute("DROP INDEX knowledge_active_recent")
        db.execute("PRAGMA user_version = 1")
    with LessonStore(path) as store:
        assert [x.id for x in store.active(tools=["check_cli_setup"])] == [kept]
        backup = store.backup_path(1)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 5
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"knowledge_active_tool", "knowledge_active_recent"} <= names
    assert backup == tmp_path / "l.db.schema1.bak"
    with sqlite3.connect(backup) as old:
        assert old.execute("PRAGMA user_version").fetchone()[0] == 1
        assert old.execute("SELECT id FROM knowledge").fetchall() == [(kept,)]


#: A token in GitHub's documented format for a personal access token: ``ghp_`` and 36
#: characters of [A-Za-z0-9] (GitHub docs, "About authentication to GitHub", token formats).
TOKEN = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"


def _every_text_in(path: Path) -> str:
    with sqlite3.connect(path) as db:
        return " ".join(str(v) for row in db.execute("SELECT * FROM knowledge") for v in row)


def _every_value_in(target: StoreTarget) -> str:
    """Every column of every lesson as another connection reads it (PostgreSQL's ``search``
    vector included: a token there would be stored too)."""
    return " ".join(str(v) for row in target.rows("SELECT * FROM knowledge") for v in row)


def test_a_token_in_a_declared_detail_unblock_or_metadata_is_never_stored_in_a_lesson(
        store_target: StoreTarget) -> None:
    leaky = Situation(Kind.AUTH, "gh", interactive=True, unblock=f"GH_TOKEN={TOKEN} gh auth status",
                      detail=f"env has GH_TOKEN={TOKEN} but it was refused")
    with LessonStore(store_target.url) as store:
        lesson = store.record(leaky, tool="check_cli_setup", fingerprint=FP, content=f"refused: {leaky.detail}",
                              source="escalated", metadata={"seen": f"token {TOKEN}", "api_key": "abcd1234"})
        assert lesson.content == "refused: env has GH_TOKEN=*** but it was refused"
        assert lesson.unblock == "GH_TOKEN=*** gh auth status"
        assert lesson.metadata == {"seen": "token ***", "api_key": "***"}
        again = store.record(leaky, tool="check_cli_setup", fingerprint=FP, content="x", source="escalated")
        assert again.id == lesson.id  # the redacted unblock compares equal to the stored one: re-verified
    assert len(TOKEN) == 40 and "ghp_" not in _every_value_in(store_target) and "A1b2" not in _every_value_in(store_target)


def test_the_keeper_remembers_a_declared_blocker_whose_detail_holds_a_token_without_the_token(
        store_target: StoreTarget) -> None:
    # the token sits past the quoted evidence's 200-character cut: redacted before cutting, no piece of it stays
    detail = "x" * 180 + f" GH_TOKEN={TOKEN} was rejected: HTTP 401"
    situation = Situation(Kind.AUTH, "gh", interactive=True, unblock="gh auth login", source=Source.DECLARED,
                          detail=detail)
    with LessonStore(store_target.url) as store:
        keeper = LessonKeeper(store, fingerprint=lambda subject: FP)
        lesson = keeper.remember(situation, tool="check_cli_setup", result_text=detail, why="escalated")
        assert lesson is not None and "ghp_" not in lesson.content and "A1b2" not in lesson.content
    assert "ghp_" not in _every_value_in(store_target) and "A1b2" not in _every_value_in(store_target)


#: The lesson store's layout as schema 1 wrote it (lessons.py before schema 2: the table, the
#: subject index, the FTS5 table and its triggers), written out here so the test builds the
#: old file the way the old code did, not with the current code.
_SCHEMA_1 = (
    """CREATE TABLE knowledge (
        id INTEGER PRIMARY KEY, domain TEXT NOT NULL, tool TEXT NOT NULL, subject TEXT NOT NULL,
        kind TEXT NOT NULL, fingerprint TEXT NOT NULL, unblock TEXT, probe TEXT, content TEXT NOT NULL,
        confidence REAL NOT NULL, created_at REAL NOT NULL, last_verified_at REAL NOT NULL, invalidated_at REAL,
        superseded_by INTEGER REFERENCES knowledge(id), source TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}'
    )""",
    "CREATE INDEX knowledge_active ON knowledge (subject, fingerprint) "
    "WHERE invalidated_at IS NULL AND superseded_by IS NULL",
    "CREATE VIRTUAL TABLE knowledge_fts USING fts5(content, subject, tool, content='knowledge', content_rowid='id')",
    """CREATE TRIGGER knowledge_ai AFTER INSERT ON knowledge BEGIN
        INSERT INTO knowledge_fts (rowid, content, subject, tool) VALUES (new.id, new.content, new.subject, new.tool);
    END""",
    """CREATE TRIGGER knowledge_au AFTER UPDATE OF content, subject, tool ON knowledge BEGIN
        INSERT INTO knowledge_fts (knowledge_fts, rowid, content, subject, tool)
            VALUES ('delete', old.id, old.content, old.subject, old.tool);
        INSERT INTO knowledge_fts (rowid, content, subject, tool) VALUES (new.id, new.content, new.subject, new.tool);
    END""",
)
#: What schema 2 added: the partial indexes of the turn-start query.
_INDEXES_2 = (
    "CREATE INDEX knowledge_active_tool ON knowledge (tool, last_verified_at, id) "
    "WHERE invalidated_at IS NULL AND superseded_by IS NULL",
    "CREATE INDEX knowledge_active_recent ON knowledge (last_verified_at, id) "
    "WHERE invalidated_at IS NULL AND superseded_by IS NULL",
)
#: The token's 36 characters after ``ghp_``: one FTS5 term (unicode61 splits at ``_``).
TOKEN_TERM = TOKEN.removeprefix("ghp_")


def _old_store(path: Path, version: int) -> None:
    """A lesson store of ``version`` (1 or 2) as the code of that time left it, holding a
    lesson recorded before redaction: tokens in its content, unblock, probe and metadata."""
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute(f"PRAGMA user_version = {version}")
        for statement in _SCHEMA_1 + (_INDEXES_2 if version >= 2 else ()):
            db.execute(statement)
        db.execute(
            "INSERT INTO knowledge (domain, tool, subject, kind, fingerprint, unblock, probe, content, confidence,"
            " created_at, last_verified_at, source, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            ("", "check_cli_setup", "gh", "auth", FP, f"GH_TOKEN={TOKEN} gh auth status",
             json.dumps({"tool": "check_cli_setup", "args": {"name": "gh", "token": TOKEN}}),
             f"gh refused GH_TOKEN={TOKEN}", 0.5, 1.0, 1.0, "escalated",
             json.dumps({"seen": f"token {TOKEN}"})),
        )
    os.sync()


def _fts_rows_holding(path: Path, term: str) -> list[int]:
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute("SELECT rowid FROM knowledge_fts WHERE knowledge_fts MATCH ?",
                                         (f'"{term}"',))]


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_store_holding_tokens_is_redacted_in_place_after_a_backup_that_keeps_none(
        tmp_path: Path, version: int) -> None:
    path = tmp_path / "l.db"
    _old_store(path, version)
    with sqlite3.connect(path) as db:
        original = db.execute("SELECT * FROM knowledge").fetchall()
    assert _fts_rows_holding(path, TOKEN_TERM) == [original[0][0]]
    with LessonStore(path) as store:
        assert store.schema == 5
        (lesson,) = store.all()
        assert lesson.content == "gh refused GH_TOKEN=***"
        assert lesson.unblock == "GH_TOKEN=*** gh auth status"
        assert lesson.probe == Probe.of("check_cli_setup", {"name": "gh", "token": "***"})
        assert lesson.metadata == {"seen": "token ***"}
        assert [x.id for x in store.search("refused")] == [lesson.id]
        backup = store.backup_path(version)
    assert backup == tmp_path / f"l.db.schema{version}.bak"
    from unstuck.redact import redact_document  # the rule's owner: the copy keeps rows as the boundary does

    with sqlite3.connect(backup) as old:  # the copy is the store's old layout, every text redacted
        assert old.execute("PRAGMA user_version").fetchone()[0] == version
        assert old.execute("SELECT * FROM knowledge").fetchall() == [
            tuple(redact_document(v) if isinstance(v, str) else v for v in row) for row in original]
        old.execute("INSERT INTO knowledge_fts (knowledge_fts) VALUES ('integrity-check')")  # raises when off
    assert TOKEN_TERM not in _every_text_in(backup) and _fts_rows_holding(backup, TOKEN_TERM) == []
    assert TOKEN_TERM.encode() not in backup.read_bytes() and backup.stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 5
        db.execute("INSERT INTO knowledge_fts (knowledge_fts) VALUES ('integrity-check')")  # raises when off
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"knowledge_active_tool", "knowledge_active_recent"} <= names
    assert TOKEN_TERM not in _every_text_in(path) and _fts_rows_holding(path, TOKEN_TERM) == []
    # a second open finds nothing to do: the file and the copy are left as they are
    before, copy = path.read_bytes(), backup.stat()
    LessonStore(path).close()
    assert path.read_bytes() == before and backup.stat().st_mtime_ns == copy.st_mtime_ns
    assert not (tmp_path / "l.db.schema3.bak").exists()


def test_a_store_of_a_newer_schema_is_refused_naming_both_versions_and_left_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    LessonStore(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 6")
    db.close()
    before = path.read_bytes()
    for readonly in (False, True):
        with pytest.raises(LessonStoreError, match=rf"{path} is a lesson store of schema 6; this unstuck reads "
                                                   r"schemas 1 to 5; it was left untouched"):
            LessonStore(path, readonly=readonly)
    assert path.read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if ".bak" in p.name]


def test_a_read_only_open_of_an_older_store_reads_it_redacted_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    _old_store(path, 1)
    before = path.read_bytes()
    with LessonStore(path, readonly=True) as store:
        assert store.schema == 1
        (lesson,) = store.active(tools=["check_cli_setup"])
        assert lesson.content == "gh refused GH_TOKEN=***" and lesson.metadata == {"seen": "token ***"}
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["l.db"]


def test_a_probe_argument_named_like_a_secret_is_stored_masked(store_target: StoreTarget) -> None:
    situation = Situation(Kind.AUTH, "gh", unblock="gh auth login",
                          probe=Probe.of("check_cli_setup", {"name": "gh", "token": TOKEN}))
    with LessonStore(store_target.url) as store:
        lesson = store.get(record(store, situation))
    assert lesson is not None and lesson.probe == Probe.of("check_cli_setup", {"name": "gh", "token": "***"})
    assert TOKEN_TERM not in _every_value_in(store_target)


# -- both engines: schema, foreign tables, read-only opens, machines (issue 16) ----------------


def test_a_new_store_records_its_schema_version(store_target: StoreTarget) -> None:
    with LessonStore(store_target.url) as store:
        assert store.schema == 5 and store.engine is store_target.engine and store.where == store_target.where
    assert store_target.schema_version("lessons") == 5
    assert "knowledge" in store_target.tables()


def test_a_store_holding_another_programs_knowledge_table_is_refused_and_left_untouched(
        store_target: StoreTarget) -> None:
    store_target.execute("CREATE TABLE knowledge (fact TEXT)")
    store_target.execute("INSERT INTO knowledge VALUES ('water is wet')")
    with pytest.raises(LessonStoreError, match=r"another program's .*left untouched") as caught:
        LessonStore(store_target.url)
    assert store_target.where in str(caught.value)
    assert store_target.tables() == {"knowledge"}
    assert store_target.rows("SELECT fact FROM knowledge") == [("water is wet",)]


def test_a_read_only_open_reads_the_lessons_another_open_recorded(store_target: StoreTarget) -> None:
    with LessonStore(store_target.url) as store:
        kept = record(store)
    with LessonStore(store_target.url, readonly=True) as store:
        assert store.schema == 5
        assert [x.id for x in store.active(tools=["check_cli_setup"])] == [kept]
        assert [x.id for x in store.search("logged")] == [kept]


def test_a_write_through_a_read_only_store_fails_with_the_stores_error_and_is_kept(
        store_target: StoreTarget) -> None:
    LessonStore(store_target.url).close()
    with LessonStore(store_target.url, readonly=True) as store:
        with pytest.raises(LessonStoreError) as caught:
            record(store)
        assert str(caught.value).startswith(f"LessonStore.record on {store_target.where} failed")
        assert store.failures == [str(caught.value)]
    assert store_target.rows("SELECT count(*) FROM knowledge") == [(0,)]


def test_a_lesson_names_the_machine_that_recorded_it(store_target: StoreTarget,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNSTUCK_HOST_ID", "build-07")
    with LessonStore(store_target.url) as store:
        lesson = store.get(record(store))
        assert store.host == "build-07" and lesson is not None and lesson.host == "build-07"
    assert store_target.rows("SELECT host FROM knowledge") == [("build-07",)]


SAME_LESSON = """
import sys
from unstuck.lessons import LessonStore
from unstuck.situations import Kind, Situation
with LessonStore(sys.argv[1]) as store:
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(int(sys.argv[2])):
        store.record(Situation(Kind.AUTH, "gh", unblock="gh auth login"), tool="check_cli_setup",
                     fingerprint="/usr/bin/gh|gh version 2.23.0 (2023-02-14)", content="gh was logged out",
                     source="escalated")
print("done")
"""


def test_processes_recording_the_same_lesson_at_once_make_one_active_row(store_target: StoreTarget) -> None:
    LessonStore(store_target.url).close()  # the store exists: the race is on the record, not the schema
    outputs = run_at_once([[sys.executable, "-c", SAME_LESSON, store_target.url, "20"]] * 4, timeout=120)
    assert [code for code, _, _ in outputs] == [0] * 4, outputs
    with LessonStore(store_target.url) as store:
        (lesson,) = store.all()  # one row: the first recorded it, the other 79 re-verified it
        assert lesson.active and lesson.confidence == 1.0  # 0.5 raised by 0.1 per re-verification, at most 1.0


# -- PostgreSQL only ------------------------------------------------------------------------------


def test_a_postgres_store_of_a_newer_schema_is_refused_naming_it_and_left_as_it_is(
        pg_store: StoreTarget) -> None:
    with LessonStore(pg_store.url) as store:
        kept = record(store)
    pg_store.set_schema_version("lessons", 6)
    before = pg_store.rows("SELECT * FROM knowledge")
    for readonly in (False, True):
        with pytest.raises(LessonStoreError, match=r" of schema 6; this unstuck reads schemas up to 5") as caught:
            LessonStore(pg_store.url, readonly=readonly)
        assert pg_store.where in str(caught.value) and "unstuck:***@" in str(caught.value)
    assert pg_store.rows("SELECT * FROM knowledge") == before and before[0][0] == kept
    assert pg_store.schema_version("lessons") == 6


def test_postgres_full_text_search_finds_a_word_of_the_content_subject_or_tool_and_nothing_else(
        pg_store: StoreTarget) -> None:
    with LessonStore(pg_store.url) as store:
        gh = record(store)
        npm = store.record(Situation(Kind.NOT_INSTALLED, "npm", unblock="apt install npm"), tool="run_command",
                           fingerprint="", content="npm: command not found", source="escalated").id
        assert [x.id for x in store.search("npm")] == [npm]  # a word of its subject and content
        assert [x.id for x in store.search("check_cli_setup")] == [gh]  # its tool
        assert [x.id for x in store.search("LOGGED")] == [gh]  # the 'simple' configuration folds case
        assert store.search("gh npm") == []  # every word must match
        assert store.search("log") == []  # whole words, not prefixes
        assert store.search("command & !found | gh") == []  # no tsquery syntax: plain words
        # the search vector is a generated column: an update outside the store is indexed too
        pg_store.execute("UPDATE knowledge SET content = 'token expired' WHERE id = ?", (gh,))
        assert [x.id for x in store.search("expired")] == [gh] and store.search("logged") == []


def test_a_lessons_content_is_kept_to_its_first_characters_on_either_engine(store_target: StoreTarget) -> None:
    # 300,000 distinct words: a tsvector over 1 MB, which PostgreSQL refuses (8.11.1 "tsvector")
    long = " ".join(f"w{i}" for i in range(300_000))
    with LessonStore(store_target.url) as store:
        lesson = store.record(LOGGED_OUT, tool="check_cli_setup", fingerprint=FP, content=long, source="escalated")
        assert lesson.content == long[:CONTENT_LIMIT] and [x.id for x in store.search("w1")] == [lesson.id]
