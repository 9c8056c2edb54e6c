"""The skip allow-list of CI (``tests/allowed_skips.txt``), read by ``.ci/run``.

A skipped test proves nothing, so CI fails on every skip but those of the tests listed in
that file, by id. Standard library only: ``.ci/run`` imports this module with the system
Python, after tox, to check the junit reports.
"""

from __future__ import annotations

from pathlib import Path

LIST = Path(__file__).with_name("allowed_skips.txt")


def allowed(text: str | None = None) -> dict[str, str]:
    """Test id (``path::function``) -> why it may skip, from the list (``text``: its text)."""
    out: dict[str, str] = {}
    for line in (LIST.read_text() if text is None else text).splitlines():
        entry, _, why = line.partition("#")
        if entry.strip():
            out[entry.strip()] = why.strip()
    return out


def node_id(classname: str, name: str, root: Path = LIST.parent.parent) -> str:
    """The list's id of a junit test case: its module's path (the longest dotted prefix of
    ``classname`` that is a file under ``root``), any class, the function without its
    parameters (``test_x[a-b]`` -> ``test_x``)."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        module = "/".join(parts[:cut]) + ".py"
        if (root / module).is_file():
            return "::".join([module, *parts[cut:], name.partition("[")[0]])
    return "::".join([classname, name.partition("[")[0]])
