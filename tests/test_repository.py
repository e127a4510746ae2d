"""The checkout itself: no text file carries what an unfinished merge leaves behind."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A conflict hunk's lines, exactly as git writes them: seven marker characters
# at the start of a line, then a space and a label, or (for the separator) nothing.
_MARKER = re.compile(r"^(?:<{7} |\|{7} |>{7} |={7}$)", re.MULTILINE)


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
    ).stdout.decode()
    files: list[Path] = []
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if not path.is_file() or path.is_symlink():
            continue  # deleted in the work tree, or a link to another file
        data = path.read_bytes()
        if b"\0" not in data:
            files.append(path)
    return files


def _markers(text: str) -> list[int]:
    return [text.count("\n", 0, found.start()) + 1 for found in _MARKER.finditer(text)]


def test_no_tracked_text_file_has_a_merge_conflict_marker() -> None:
    files = _tracked_text_files()
    assert ROOT / "README.md" in files and Path(__file__) in files
    found = {
        str(path.relative_to(ROOT)): lines
        for path in files
        if (lines := _markers(path.read_text(encoding="utf-8", errors="replace")))
    }
    assert found == {}


def test_the_check_finds_each_marker_and_only_markers() -> None:
    hunk = "\n".join(["a", "<" * 7 + " HEAD", "ours", "|" * 7 + " base", "=" * 7, "theirs", ">" * 7 + " qa", "b"])
    assert _markers(hunk) == [2, 4, 5, 7]
    # Underlines, RST table borders and quoted markers are text, not conflicts.
    prose = "\n".join(["Title", "=" * 7 + "==", "=" * 7 + "  " + "=" * 7, "  " + "<" * 7 + " HEAD", ">" * 7])
    assert _markers(prose) == []


def test_the_wheel_ships_the_typed_marker() -> None:
    # hatchling builds the wheel from `packages` minus what git ignores or `exclude`
    # names, so the marker ships exactly when it is tracked, inside a listed package
    # and not excluded.
    import tomllib

    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert "agentfx" in wheel["packages"]
    assert not any("py.typed" in pattern for pattern in wheel.get("exclude", []))
    assert ROOT / "agentfx" / "py.typed" in _tracked_text_files()
