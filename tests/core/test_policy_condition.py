"""CEL conditions over metadata: match, non-match, errors and non-bools, the cost bound."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lifecycle_controller.core.policy import condition as policy_condition
from lifecycle_controller.core.policy.condition import (
    MAX_CONDITION_LENGTH,
    MAX_EVALUATION_COST,
    ConditionError,
    ConditionResult,
    OwnerReference,
    Subject,
    compile_condition,
)
from lifecycle_controller.core.policy.condition_cost import Sizes, analyse

from .support import ts

CREATED = ts("2026-10-01T12:00:00.5Z")
JOB = OwnerReference("batch/v1", "Job", "nightly", "uid-job", controller=True)


def run(source: str, **overrides: object) -> ConditionResult:
    view: dict[str, object] = {
        "kind": "ConfigMap",
        "api_version": "v1",
        "name": "pr-1234",
        "namespace": "pr-1234",
        "labels": {"team": "web", "env": "preview"},
        "annotations": {"note": "x"},
        "creation_ns": CREATED,
        "owner_references": (JOB,),
    }
    view.update(overrides)
    return compile_condition(source).evaluate(Subject(**view))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('object.metadata.labels["team"] != "core"', True),
        ('object.metadata.labels["team"] == "core"', False),
        ('"env" in object.metadata.labels', True),
        ("has(object.metadata.labels.owner)", False),
        ('object.metadata.name.startsWith("pr-")', True),
        ('object.metadata.name.matches("^pr-[0-9]+$")', True),
        ('object.metadata.namespace == "pr-1234"', True),
        ('object.metadata.annotations["note"] == "x"', True),
        (
            'object.metadata.creationTimestamp == timestamp("2026-10-01T12:00:00.5Z")',
            True,
        ),
        (
            "object.metadata.creationTimestamp + duration('48h')"
            ' < timestamp("2026-10-03T12:00:01Z")',
            True,
        ),
        ('object.metadata.ownerReferences.exists(o, o.kind == "Job" && o.controller)', True),
        ('object.metadata.ownerReferences.all(o, o.apiVersion.startsWith("apps/"))', False),
    ],
)
def test_conditions_over_metadata(source: str, expected: bool) -> None:
    assert run(source) == ConditionResult(expected)


def test_a_manifest_without_creation_timestamp_has_none() -> None:
    assert run("has(object.metadata.creationTimestamp)", creation_ns=None).matched is False
    assert run("has(object.metadata.creationTimestamp)").matched is True


def test_a_cluster_scoped_object_has_an_empty_namespace() -> None:
    assert run('object.metadata.namespace == ""', namespace=None).matched is True


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ('object.metadata.labels["owner"] == "x"', "condition failed: 'owner'"),
        ("1 / 0 == 1", "condition failed: division by zero in CEL expression"),
        (
            "object.spec.replicas > 1",
            "condition failed: 'spec'",
        ),
        ("object.metadata.name", "condition returned str 'pr-1234', not a boolean"),
        ("object.metadata.labels.size()", "condition returned int 2, not a boolean"),
    ],
)
def test_errors_and_non_bools_do_not_match_and_say_why(source: str, problem: str) -> None:
    assert run(source) == ConditionResult(False, problem)


def test_an_undefined_variable_is_an_evaluation_problem() -> None:
    result = run("now > 1")
    assert result.matched is False
    assert result.problem is not None
    assert result.problem.startswith("condition failed: Undefined variable or function: 'now'")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("x" * (MAX_CONDITION_LENGTH + 1), "is 1025 characters long; at most 1024 are allowed"),
        (
            "object.metadata.labels.all(k, object.metadata.annotations.exists(a, a == k))",
            "nests the exists() macro inside another comprehension; "
            "at most one level is allowed, to bound its cost",
        ),
        (
            "[1].map(x, [2].filter(y, y > x)).size() == 0",
            "nests the filter() macro inside another comprehension; "
            "at most one level is allowed, to bound its cost",
        ),
    ],
)
def test_refused_before_compiling(source: str, message: str) -> None:
    with pytest.raises(ConditionError) as raised:
        compile_condition(source)
    assert str(raised.value) == message


def test_a_syntax_error_names_the_compiler_message() -> None:
    with pytest.raises(ConditionError) as raised:
        compile_condition('object.metadata.labels["team"')
    assert str(raised.value).startswith("does not compile: Failed to parse expression")


@pytest.mark.parametrize(
    "source",
    [
        # Side by side, not nested: each is linear in the metadata.
        'object.metadata.labels.all(k, k != "") && object.metadata.annotations.exists(a, a == "x")',
        # A macro name inside a string is not a macro.
        'object.metadata.labels.exists(k, k == ".all(x, x)")',
        "object.metadata.labels.exists(k, k == '.map(\\'')",
        'object.metadata.name == r".exists(" || object.metadata.name == """.map("""',
        # An escaped quote does not end a string.
        'object.metadata.name == "\\".all(x, x)" || [1].all(x, x > 0)',
        "object.metadata.name == '" + "x" * (MAX_CONDITION_LENGTH - 28) + "'",  # 1024 exactly
    ],
)
def test_within_the_cost_bound(source: str) -> None:
    compile_condition(source)


def test_only_the_compiled_extension_loads_and_only_with_the_first_condition() -> None:
    probe = (
        "import json, sys\n"
        "from lifecycle_controller.core.policy import match, model, precedence\n"
        "model.parse_policy(model.PolicyKind.CLUSTER, None, 'p', 1,"
        " {'resources': ['configmaps'], 'lifecycle': {'delete-after': '1h'}})\n"
        "before = 'cel.cel' in sys.modules\n"
        "from lifecycle_controller.core.policy.condition import compile_condition\n"
        "compile_condition('true')\n"
        "loaded = ['cel.cel' in sys.modules, 'cel' in sys.modules, 'typer' in sys.modules]\n"
        "import cel\n"  # the whole package still imports afterwards, sharing the extension
        "print(json.dumps([before, *loaded, cel.compile('1 == 1').execute({})]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    # Only the compiled extension, not the package and the command-line libraries it imports.
    assert json.loads(result.stdout) == [False, True, False, False, True]


def test_the_whole_package_stands_in_when_the_extension_cannot_be_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(policy_condition, "_extension", lambda: None)
    compiler = policy_condition._compiler.__wrapped__()
    assert compiler.compile('"a" == "a"').execute({}) is True


# --- the cost bound on the parsed expression ----------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        # A comment between the dot and the macro once hid a nested comprehension from the
        # text scan: six levels over 20 labels stalled the controller's event loop.
        "object.metadata.labels.all(a, object.metadata.labels. // x\n all(b, a != b))",
        "object.metadata.labels.all(a, object.metadata.labels.//\nexists(b, a == b))",
        "object.metadata.labels.exists(a, object.metadata.labels /* */ .all(b, true))",
    ],
)
def test_a_comment_does_not_hide_a_nested_comprehension(source: str) -> None:
    with pytest.raises(ConditionError) as raised:
        compile_condition(source)
    assert "macro inside another comprehension" in str(raised.value) or str(
        raised.value
    ).startswith("does not compile")


@pytest.mark.parametrize(
    "source",
    [
        'object.metadata.name == "// not a comment" && [1].all(x, x > 0)',
        "object.metadata.name == r'''.all(x, [1].all(y, y))''' || true",
        "object.metadata.labels.exists(k, k == 'a') // a trailing comment .all(",
        'object.metadata.labels.map(k, k).exists(k, k == "a")',  # a chain, not a nest
    ],
)
def test_strings_and_comments_are_not_code(source: str) -> None:
    compile_condition(source)


def test_a_condition_over_the_budget_on_typical_metadata_is_refused() -> None:
    """A single level can still be quadratic: a string grown by concatenation, split into one
    element per character, each compared with the whole."""
    grown = " + ".join(["object.metadata.name"] * 20)
    source = f"({grown}).split('').exists(c, c == {grown})"
    with pytest.raises(ConditionError) as raised:
        compile_condition(source)
    assert str(raised.value).startswith("has an estimated cost of ")
    assert str(raised.value).endswith(f"at most {MAX_EVALUATION_COST} are allowed")


def test_an_evaluation_over_the_budget_is_not_run_and_says_why() -> None:
    """Metadata larger than the compile-time sizes is estimated again before evaluating."""
    source = "object.metadata.annotations.exists(k, object.metadata.annotations[k].size() > 0)"
    condition = compile_condition(source)
    huge = {f"k{i}": "v" * 200 for i in range(3000)}
    result = condition.evaluate(
        Subject(
            kind="ConfigMap",
            api_version="v1",
            name="n",
            namespace="ns",
            labels={},
            annotations=huge,
            creation_ns=None,
            owner_references=(),
        )
    )
    assert result.matched is False
    assert result.problem is not None
    assert result.problem.startswith("condition failed: estimated cost ")
    assert result.problem.endswith(f"exceeds the budget of {MAX_EVALUATION_COST} steps")
    small = condition.evaluate(
        Subject(
            kind="ConfigMap",
            api_version="v1",
            name="n",
            namespace="ns",
            labels={},
            annotations={"a": "b"},
            creation_ns=None,
            owner_references=(),
        )
    )
    assert small == ConditionResult(True)


def test_the_crds_limit_is_the_controllers() -> None:
    """The CRDs once accepted 4,096 characters while the controller refused over 1,024."""
    crds = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "lifecycle-controller" / "crds"
    for path in sorted(crds.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            assert spec["properties"]["condition"]["maxLength"] == MAX_CONDITION_LENGTH, path


@pytest.mark.parametrize(
    "source",
    [
        r"object.metadata.name == r'\.all(x, [1].all(y, y))\' || true",  # raw: \ is text
        "object.metadata.name == '''it's\n.all(x, [1].all(y, y))'''",
        'b"\\".all(x, [1].all(y, y))" != b"" || br".map([1].all(y, y))" != b""',
        "object.metadata.name == 'a' // .all(x, [1].all(y, y))\n || true",
    ],
)
def test_the_tokenizer_reads_every_string_form(source: str) -> None:
    """None of these nests a comprehension: the macros are inside strings or a comment."""
    compile_condition(source)


def test_the_estimate_grows_with_the_metadata() -> None:
    model = analyse("object.metadata.labels.exists(k, k.startsWith('team'))")
    small = Sizes(10, 5, 2, 40, 1, 20, 0, 0)
    large = Sizes(10, 5, 200, 4000, 1, 20, 0, 0)
    assert 0 < model.cost(small) < model.cost(large) <= MAX_EVALUATION_COST


# --- regular expressions and time ---------------------------------------------------------

#: The issue's condition: 1,022 characters that compile ``\w{200}`` 493 times per object (it
#: took about 30 s per evaluation, and was accepted at an estimated 6,903 steps).
REGEX_BOMB = "[" + ",".join(["0"] * 493) + "].exists(x, 'a'.matches('\\\\w{200}'))"


def test_a_pattern_compiled_per_call_counts_per_call() -> None:
    assert len(REGEX_BOMB) == 1022
    with pytest.raises(ConditionError) as raised:
        compile_condition(REGEX_BOMB)
    message = str(raised.value)
    assert message.startswith("has an estimated cost of ")
    assert message.endswith(
        "at most 1000000 are allowed (matches() compiles its pattern again on every call: "
        '"\\\\w{200}" costs 20001000 steps each time; '
        r"\w, \W, \d and \p{...} are Unicode tables, [a-z0-9_] is not)"
    )


@pytest.mark.parametrize(
    "source",
    [
        "object.metadata.name.matches(object.metadata.labels['pattern'])",
        "object.metadata.name.matches('^a' + 'b$')",
        "object.metadata.name.matches(('^ab$'))",
        "object.metadata.name.matches()",
        "matches(object.metadata.name, object.metadata.namespace)",
    ],
)
def test_a_pattern_must_be_a_literal(source: str) -> None:
    with pytest.raises(ConditionError) as raised:
        compile_condition(source)
    assert str(raised.value) == (
        "calls matches() with a pattern that is not a string literal; write the pattern "
        "out, so that its cost is known when the policy is read"
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("object.metadata.name.matches('(')", "( ^ error: unclosed group"),
        ("object.metadata.name.matches(r'a{2,1}')", "invalid repetition count range"),
    ],
)
def test_a_pattern_the_engine_refuses_is_refused_with_the_policy(source: str, message: str) -> None:
    with pytest.raises(ConditionError) as raised:
        compile_condition(source)
    assert str(raised.value).startswith("matches() pattern ")
    assert "is not a valid regular expression: " in str(raised.value)
    assert message in str(raised.value)
    assert "Check function arguments" not in str(raised.value)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("object.metadata.name.matches(r'^pr-\\d+$')", True),
        ("matches(object.metadata.name, '^pr-')", None),  # the library has no global form
        ("object.metadata.labels.exists(k, k.matches('^te[a-z]+$'))", True),
    ],
)
def test_literal_patterns_evaluate(source: str, expected: bool | None) -> None:
    result = run(source)
    assert result.matched is bool(expected)
    assert (result.problem is None) is (expected is not None)


def test_a_long_referenced_by_is_estimated_per_object() -> None:
    source = "referencedBy.exists(r, r.matches('^Pod/'))"
    condition = compile_condition(source)
    few = run(source, referenced_by=("Pod/a", "Deployment/b"))
    assert few == ConditionResult(True)
    many = tuple(f"Deployment/app-{i:05d}" for i in range(20_000))
    result = condition.evaluate(
        Subject(
            kind="ConfigMap",
            api_version="v1",
            name="c",
            namespace="ns",
            labels={},
            annotations={},
            creation_ns=None,
            owner_references=(),
            referenced_by=many,
        )
    )
    assert not result.matched
    assert result.problem is not None
    assert result.problem.startswith("condition failed: estimated cost ")


class Stopwatch:
    """CPU time that moves ``step`` nanoseconds per reading."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.now = 0
        self.readings = 0

    def __call__(self) -> int:
        self.readings += 1
        self.now += self.step
        return self.now


def evaluate(condition: policy_condition.Condition, stopwatch: Stopwatch) -> ConditionResult:
    return condition.evaluate(
        Subject(
            kind="ConfigMap",
            api_version="v1",
            name="pr-1",
            namespace="ns",
            labels={"team": "web"},
            annotations={},
            creation_ns=None,
            owner_references=(),
        ),
        stopwatch=stopwatch,
    )


OVERRUN = (
    "condition failed: an evaluation took 200 ms, over the budget of 100 ms; "
    "it is not evaluated again until the policy changes"
)


@pytest.mark.parametrize(
    "source", ["object.metadata.labels.team == 'web'", "object.metadata.labels.missing == 'x'"]
)
def test_an_evaluation_over_the_time_budget_marks_the_condition(source: str) -> None:
    """Whether it matched or failed, it took too long: held, and not evaluated again."""
    condition = compile_condition(source)
    slow = Stopwatch(200_000_000)
    assert evaluate(condition, slow) == ConditionResult(False, OVERRUN)
    assert slow.readings == 2
    fast = Stopwatch(1)
    assert evaluate(condition, fast) == ConditionResult(False, OVERRUN)
    assert fast.readings == 0  # not run again
    fresh = evaluate(compile_condition(source), fast)  # the next generation starts afresh
    assert fresh.problem != OVERRUN
    assert fast.readings == 2


def test_an_evaluation_within_the_time_budget_answers() -> None:
    condition = compile_condition("object.metadata.labels.team == 'web'")
    exact = Stopwatch(policy_condition.EVALUATION_TIME_BUDGET_NS)
    assert evaluate(condition, exact) == ConditionResult(True)
    assert evaluate(condition, exact) == ConditionResult(True)
    assert exact.readings == 4
