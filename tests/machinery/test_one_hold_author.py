"""One module decides whether a due action is held (docs/architecture.md#decision-path).

Every guardrail, the policy fence and a policy's ``limit`` among them, answers through
:func:`~lifecycle_controller.core.decision.guardrails.check`: the pass gathers each
guardrail's facts first (the fence's comparison on its fresh read too), and ``check`` alone
turns them into a ``Hold``, in one order, tested as one table
(``tests/core/test_guardrail_decisions.py``). A ``Hold`` built anywhere else would be a
second author of that order, as the fence's hold once was (``core/policy/fence.py`` built it
after the verdict, ahead of ``check``). Read from the sources: only
``core/decision/guardrails.py`` calls ``Hold(...)``; elsewhere a hold is only read, or
copied with :func:`dataclasses.replace` (a requeue moved to an enforced deadline).
"""

from __future__ import annotations

import ast
from pathlib import Path

import lifecycle_controller

PACKAGE = Path(lifecycle_controller.__file__).parent


def _builds_a_hold(tree: ast.AST) -> bool:
    """``Hold(...)`` or ``<module>.Hold(...)`` is called."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "Hold":
            return True
        if isinstance(func, ast.Attribute) and func.attr == "Hold":
            return True
    return False


def _modules() -> dict[str, ast.AST]:
    """Every module of the package, by its path in it (``core/decision/guardrails``)."""
    return {
        path.relative_to(PACKAGE).with_suffix("").as_posix(): ast.parse(
            path.read_text(encoding="utf-8"), filename=str(path)
        )
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_only_the_guardrails_build_a_hold() -> None:
    building = {name for name, tree in _modules().items() if _builds_a_hold(tree)}
    assert building == {"core/decision/guardrails"}


def test_the_check_sees_a_hold_built_elsewhere() -> None:
    """The check itself: the fence's hold as it was built after the verdict is caught."""
    old = ast.parse(
        "def fence_hold(decision, why, retry_after_ns):\n"
        "    return Hold(\n"
        "        reason=HoldReason.POLICY_UNCONFIRMED,\n"
        "        held=decision,\n"
        "        requeue_after_ns=retry_after_ns,\n"
        "        log=why,\n"
        "    )\n"
    )
    assert _builds_a_hold(old)
    assert _builds_a_hold(ast.parse("hold = guardrails.Hold(reason=reason, held=d)"))
    assert not _builds_a_hold(ast.parse("isinstance(final, Hold) and final.reason is reason"))
    assert not _builds_a_hold(ast.parse("dataclasses.replace(held, requeue_after_ns=by)"))
