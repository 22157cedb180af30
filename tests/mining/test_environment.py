"""unstuck.mining.environment's FolderSession: a restore after a rollout planted links to files
outside the session's folder removes the links, never what they point to."""

from __future__ import annotations

from pathlib import Path

from outside import Outside
from unstuck.mining.environment import FolderSession, Task, Verification
from unstuck.tools import Toolset


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
