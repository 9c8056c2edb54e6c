"""A condition reading a list's elements keeps those elements' paths alone, and answers on the
cut-down object exactly as on the whole one."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from lifecycle_controller.core.policy.condition import (
    ConditionError,
    Subject,
    compile_condition,
)
from lifecycle_controller.core.policy.condition_cost import analyse
from lifecycle_controller.core.policy.condition_reads import unkept_refusal
from lifecycle_controller.core.policy.field_paths import (
    EVERY_ELEMENT,
    UNREAD_ELEMENT,
    dotted,
    element,
    pick,
    read_values,
)

_RUN = {"image": "app:1", "state": {"terminated": {"finishedAt": "T", "exitCode": 1}}}
_SIDE = {"image": "side:1", "state": {"running": {"startedAt": "S"}}}
POD: dict[str, Any] = {"status": {"phase": "Failed", "containerStatuses": [_RUN, _SIDE]}}
STATUSES = ("status", "containerStatuses")
_FINISHED = ("state", "terminated", "finishedAt")


@pytest.mark.parametrize(
    ("paths", "picked"),
    [
        # element 0's path alone, in a list of one
        ({(*STATUSES, "[0]", *_FINISHED)},
         {"status": {"containerStatuses": [{"state": {"terminated": {"finishedAt": "T"}}}]}}),
        # element 1 keeps its position: what no path reads in front of it is a placeholder
        ({(*STATUSES, "[1]", "image")},
         {"status": {"containerStatuses": [UNREAD_ELEMENT, {"image": "side:1"}]}}),
        ({(*STATUSES, "[0]", "image"), (*STATUSES, "[1]", "state")},
         {"status": {"containerStatuses": [{"image": "app:1"}, {"state": _SIDE["state"]}]}}),
        ({(*STATUSES, "[0]")}, {"status": {"containerStatuses": [_RUN]}}),  # element whole
        # past the end: the list as long as it is, so the index is out of range as before
        ({(*STATUSES, "[5]", "image")},
         {"status": {"containerStatuses": [UNREAD_ELEMENT, UNREAD_ELEMENT]}}),
        # every element, each cut down
        ({(*STATUSES, "[*]", "image")},
         {"status": {"containerStatuses": [{"image": "app:1"}, {"image": "side:1"}]}}),
        ({(*STATUSES, "[*]", "image"), (*STATUSES, "[1]", "state", "running")},
         {"status": {"containerStatuses": [
             {"image": "app:1"}, {"image": "side:1", "state": {"running": {"startedAt": "S"}}},
         ]}}),
        # the list read whole beside an element: the list whole
        ({STATUSES, (*STATUSES, "[0]", "image")}, {"status": {"containerStatuses": [_RUN, _SIDE]}}),
        # a step that does not fit the value keeps the value whole
        ({("status", "phase", "[0]")}, {"status": {"phase": "Failed"}}),
        ({("status", "[0]", "x")}, {"status": POD["status"]}),
        ({(*STATUSES, "image")}, {"status": {"containerStatuses": [_RUN, _SIDE]}}),
        ({(*STATUSES, "[0]", "x"), (*STATUSES, "image")},
         {"status": {"containerStatuses": [_RUN, _SIDE]}}),
        ({(*STATUSES, "[0]", "image", "[0]")},
         {"status": {"containerStatuses": [{"image": "app:1"}]}}),
    ],
)  # fmt: skip
def test_pick_keeps_the_elements_read_in_their_positions(
    paths: set[tuple[str, ...]], picked: dict[str, Any]
) -> None:
    assert pick(POD, paths) == picked


@pytest.mark.parametrize(
    ("path", "written"),
    [
        ((*STATUSES, element(0), *_FINISHED),
         "object.status.containerStatuses[0].state.terminated.finishedAt"),
        ((*STATUSES, EVERY_ELEMENT, "image"), "object.status.containerStatuses[*].image"),
        (("spec", "replicas"), "object.spec.replicas"),
        ((), "object"),
    ],
)  # fmt: skip
def test_a_path_is_written_as_a_condition_writes_it(path: tuple[str, ...], written: str) -> None:
    assert dotted(path) == written


def test_read_values_follows_elements() -> None:
    paths = {
        (*STATUSES, "[0]", "image"),
        (*STATUSES, "[3]", "image"),
        (*STATUSES, "[*]", "state", "running", "startedAt"),
        ("status", "phase", "[0]"),
    }
    assert read_values(paths, POD) == [
        'object.status.containerStatuses[*].state.running.startedAt = [null, "S"]',
        'object.status.containerStatuses[0].image = "app:1"',
        "object.status.containerStatuses[3].image is absent",
        "object.status.phase[0] is absent",
    ]


def test_an_element_of_a_kept_metadata_field_is_kept_and_of_the_rest_refused() -> None:
    assert unkept_refusal(analyse('object.metadata.ownerReferences[0].kind == "Job"').reads) is None
    refused = unkept_refusal(analyse("object.metadata.finalizers[0] == 'x'").reads)
    assert refused is not None
    assert "object.metadata.finalizers" in refused


_LIST = "object.status.containerStatuses"
_FORMS_ON_A_POD = [
    f"timestamp({_LIST}[0].state.terminated.finishedAt)",
    f'{_LIST}[1].image == "side:1"',
    f"{_LIST}[5].image",  # out of range, on the cut-down list too
    f"has({_LIST}[0].state.running)",
    f"has({_LIST}[1].state.running) && {_LIST}[0].state.terminated.exitCode == 1",
    f"{_LIST}[0] == {_LIST}[1]",
    f"size({_LIST}) == 2 && {_LIST}[1].image.startsWith('side')",
    f"{_LIST}.exists(c, c.state.terminated.exitCode == 1)",
    f'{_LIST}.all(c, c.image != "")',
    f'{_LIST}.exists_one(c, c.image == "app:1")',
    f"{_LIST}.map(c, c.image)",
    f"{_LIST}.map(c, has(c.state.running), c.image)",
    f"{_LIST}.filter(c, has(c.state.terminated))",  # the elements themselves
    f"{_LIST}.filter(c, has(c.state.running)).map(d, d.image)",
    f'{_LIST}.all(i, c, c.image != "" && i >= 0)',  # two variables
    f'{_LIST}.exists(c, c.image in ["app:1"])',
]


@pytest.mark.parametrize("source", _FORMS_ON_A_POD)
def test_each_form_answers_on_the_cut_down_pod_as_on_the_whole_one(source: str) -> None:
    """Over the Pod cut down to what the condition reads, alone and beside every other form
    (the paths of all the policies on a type are kept together)."""
    alone = compile_condition(source).reads
    together = frozenset().union(*(compile_condition(s).reads for s in _FORMS_ON_A_POD))
    whole = _evaluated(source, POD)
    assert _evaluated(source, pick(POD, alone)) == whole
    assert _evaluated(source, pick(POD, together)) == whole


# --- the property: the cut-down object answers as the whole one ------------------------------

_SCALARS = st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["", "x"])
_KEYS = st.sampled_from(["a", "b", "l"])
#: JSON values over those keys, lists of maps (a Pod's containers) drawn often.
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(_KEYS, inner, max_size=3)
        | st.lists(st.dictionaries(_KEYS, inner, min_size=1, max_size=3), max_size=3)
    ),
    max_leaves=16,
)
_STEPS = st.sampled_from([".a", ".b", ".l", "[0]", "[1]", "[2]", "[0u]", "[-1]", "[1 - 1]"])
#: A chain of fields and indexes below object.spec.
_CHAINS = st.lists(_STEPS, max_size=4).map(lambda steps: "object.spec" + "".join(steps))
#: What a condition does with a chain: read it, test a field's presence, take its size, run
#: a macro over it (whose variable it reads in a body of its own).
_BODIES = st.sampled_from(
    ["c", "c.a", "c.l[0]", "c.l[1].b", "has(c.a)", "c.a == 1", "size(c)", "c.b.a", "c[0]"]
)
_FORMS = st.sampled_from(
    [
        "{chain}",
        "has({chain}.a)",
        "size({chain})",
        "{chain}.exists(c, {body})",
        "{chain}.all(c, {body})",
        "{chain}.exists_one(c, {body})",
        "{chain}.map(c, {body})",
        "{chain}.map(c, has(c.b), {body})",
        "{chain}.filter(c, {body})",
        "{chain}.filter(c, {body}).map(d, d)",
        "{chain}.map(c, {body}).exists(d, d == 1)",
        "{chain}.filter(c, {body}).exists(d, has(d.b))",
        "{chain} == []",
    ]
)
_EXPRESSIONS = st.builds(
    lambda form, chain, body: form.format(chain=chain, body=body), _FORMS, _CHAINS, _BODIES
)


def _unordered(value: object) -> object:
    """``value`` with its lists and maps sorted: the library iterates a map's keys in no
    fixed order (``{...}.map(k, k)`` differs from one evaluation to the next), and a
    projection never moves an element."""
    if isinstance(value, list):
        return sorted((_unordered(item) for item in value), key=repr)
    if isinstance(value, dict):
        return sorted((repr(key), _unordered(item)) for key, item in value.items())
    return value


def _evaluated(source: str, fields: dict[str, Any]) -> tuple[object, str | None]:
    subject = Subject(
        kind="Thing",
        api_version="v1",
        name="a",
        namespace="n",
        labels={},
        annotations={},
        creation_ns=None,
        owner_references=(),
        fields=fields,
    )
    found = compile_condition(source).value(subject)
    return _unordered(found.result), found.problem


@given(spec=_VALUES, first=_EXPRESSIONS, second=_EXPRESSIONS)
def test_a_condition_answers_on_the_cut_down_object_as_on_the_whole_one(
    spec: object, first: str, second: str
) -> None:
    """Two conditions read one type: over the object cut down to what either reads, each
    gives the same value, or the same problem, as over the whole object; nothing a
    condition reads is left out, and an unread element is never taken for data."""
    try:
        reads = compile_condition(first).reads | compile_condition(second).reads
    except ConditionError:  # a form CEL does not allow (has() of an index...), or too dear
        assume(False)
        raise
    whole = {"spec": spec, "status": {"unread": True}}
    cut = pick(whole, reads)
    for source in (first, second):
        assert _evaluated(source, cut) == _evaluated(source, whole), source
