"""unstuck.mining.environment's FolderSession: a restore after a rollout planted links to files
outside the session's folder removes the links, never what they point to."""

from __future__ import annotations

from pathlib import Path

import pytest

from outside import Outside
from unstuck.mining.environment import FolderSession, MiningError, Snapshot, Task, Verification
from unstuck.toolkit.specs import Toolset


class _Folder(FolderSession):
    def verify(self, task: Task, answer: str) -> Verification:
        raise AssertionError("not verified here")


def test_folder_restore_removes_links_out_and_leaves_their_targets(tmp_path: Path) -> None:
    made = Outside.make(tmp_path / "outside")
    try:
        root = tmp_path / "session"
        (root / "docs").mkdir(parents=True)
        (root / "docs" / "a.md").write_text("a\n")
        session = _Folder(root, Toolset([]))
        before = session.snapshot()
        made.plant_links(root / "docs" / "linked")
        made.plant_links(root)
        session.restore(before)
        assert made.changed() == {}
        assert all(target.exists() for target in made.targets.values())
        assert session.snapshot() == before
        assert sorted(p.name for p in root.iterdir()) == ["docs"]
    finally:
        made.close()


def test_a_snapshot_name_that_climbs_out_is_refused_and_nothing_is_written_outside(tmp_path: Path) -> None:
    root = tmp_path / "session"
    root.mkdir()
    session = _Folder(root, Toolset([]))
    for name in ("../escaped.txt", "/tmp/absolute.txt", "a/../../escaped.txt"):
        with pytest.raises(MiningError, match="is not restored"):
            session.restore(Snapshot(((name, b"x"),)))
    assert not (tmp_path / "escaped.txt").exists()
