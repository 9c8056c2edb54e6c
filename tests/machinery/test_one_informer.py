"""One informer opens every watch of the controller (docs/architecture.md#informer-loop).

The reflector (``controller/watch/reflector.py``) owns list/watch correctness: pagination and
streaming lists, jittered timeouts, 410 and ERROR events, backoff, disconnect reporting, and
one set of fault tests (``tests/unit/test_watch_purposes.py``). A module of ``controller/``
that opened a watch of its own would miss all of it, as the policy store, the rollout watch
and the Namespace presence check once did. Read from the sources:

* only the projections (``controller/watch/projection.py``, what the reflector asks the
  API server for) call the API client's watch methods or build a watch query;
* only the reflector calls a projection's watch and list methods;
* only the informer supervisor (``controller/watch/supervisor.py``) builds an informer
  and runs it: start, stop, the 403/404 retry and synced are written once, and an owner of
  informers is configuration (docs/architecture.md#informer-supervisor).
"""

from __future__ import annotations

import ast
from pathlib import Path

import lifecycle_controller.controller as controller_package

CONTROLLER = Path(controller_package.__file__).parent

#: The API client's calls that open a watch (``KubeClient``), and its raw stream.
WATCH_CALLS = {"watch_metadata", "watch_list_metadata", "watch_objects", "stream"}
#: A projection's calls (``watch/projection.py``'s ``Projection``).
PROJECTION_CALLS = {"watch", "watch_list", "list_page"}


def _calls(tree: ast.AST, names: set[str]) -> list[str]:
    return [
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
    ]


def _builds_a_watch_query(tree: ast.AST) -> bool:
    """``("watch", "true")`` in a query, or a ``watch=`` keyword argument."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and first.value in ("watch", "sendInitialEvents"):
                return True
        if isinstance(node, ast.keyword) and node.arg == "watch":
            return True
    return False


def _modules() -> dict[str, ast.AST]:
    """Every module of ``controller/``, by its path in it (``watch/reflector``)."""
    return {
        path.relative_to(CONTROLLER).with_suffix("").as_posix(): ast.parse(
            path.read_text(encoding="utf-8"), filename=str(path)
        )
        for path in sorted(CONTROLLER.rglob("*.py"))
    }


def test_only_the_projections_open_watches() -> None:
    opening = {
        name
        for name, tree in _modules().items()
        if _calls(tree, WATCH_CALLS) or _builds_a_watch_query(tree)
    }
    assert opening == {"watch/projection"}


def test_only_the_reflector_asks_a_projection() -> None:
    asking = {name for name, tree in _modules().items() if _calls(tree, PROJECTION_CALLS)}
    assert asking == {"watch/reflector"}


def _runs_informers(tree: ast.AST) -> bool:
    """``Informer(...)`` is called, or ``.run()`` of a name or attribute naming an informer."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and node.func.id == "Informer":
            return True
        if isinstance(node.func, ast.Attribute) and node.func.attr == "run":
            receiver = node.func.value
            name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
            if "informer" in name.lower():
                return True
    return False


def test_only_the_supervisor_builds_and_runs_informers() -> None:
    running = {name for name, tree in _modules().items() if _runs_informers(tree)}
    assert running == {"watch/supervisor"}


def test_the_check_sees_an_informer_run_elsewhere() -> None:
    """The check itself: the loop the reference index used to hand-write is caught."""
    old = ast.parse(
        "async def _run(self):\n"
        "    while True:\n"
        "        informer = Informer(resource=resource, keeper=keeper)\n"
        "        await informer.run()\n"
    )
    assert _runs_informers(old)
    assert _runs_informers(ast.parse("await self._informer.run()"))
    assert not _runs_informers(ast.parse("await self.elector.run(lead)"))


def test_the_check_sees_a_watch_opened_elsewhere() -> None:
    """The check itself: the code the policy store used to run is caught."""
    old = ast.parse(
        "async def _watch(self, resource, version):\n"
        "    stream = self._source.watch_objects(\n"
        "        resource, resource_version=version, timeout_seconds=300\n"
        "    )\n"
    )
    assert _calls(old, WATCH_CALLS) == ["watch_objects"]
    query = ast.parse('query = [("watch", "true"), ("resourceVersion", version)]')
    assert _builds_a_watch_query(query)
