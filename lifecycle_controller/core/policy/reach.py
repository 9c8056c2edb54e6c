"""Which of one type's policies may reach an object, found without asking every policy.

While listing, the controller asks for each object whether a policy could match it
(:meth:`~lifecycle_controller.core.policy.in_force.PolicySet.candidate`), and each pass asks
which policies match (``matching``). Asking every policy of the type each time makes start-up
grow with policies times objects. Most policies say in literal words where they act: a
``LifecyclePolicy`` in its own namespace, a ``ClusterLifecyclePolicy`` whose ``namespaces``
are literal names in those only, and a policy whose ``names`` are literal names on those
objects only. :class:`Reach` indexes one type's policies by those words once (a pass over the
policies), so that an object is checked against the few that may concern it; every answer
keeps the policies' own order, so what is done with it does not depend on the index.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from lifecycle_controller.core.policy.model import Policy, PolicyKind
from lifecycle_controller.core.text.globs import has_glob_meta

__all__ = ["Reach"]


def _literal(patterns: tuple[str, ...]) -> bool:
    """Non-empty and without a glob: exactly these names."""
    return bool(patterns) and not any(map(has_glob_meta, patterns))


@dataclass(frozen=True, slots=True)
class _Named:
    """One namespace's policies, by the literal names they are limited to."""

    policies: tuple[Policy, ...]
    #: Positions in ``policies`` of the policies whose ``names`` are all literal, by name.
    by_name: dict[str, tuple[int, ...]]
    #: Positions of the others (no ``names``, or a glob among them): they reach every name.
    any_name: tuple[int, ...]
    #: The policies at ``any_name``: the answer for a name no literal policy names.
    unnamed: tuple[Policy, ...]

    @classmethod
    def of(cls, policies: tuple[Policy, ...]) -> _Named:
        by_name: dict[str, list[int]] = {}
        any_name: list[int] = []
        for i, policy in enumerate(policies):
            if _literal(policy.names):
                for name in set(policy.names):
                    by_name.setdefault(name, []).append(i)
            else:
                any_name.append(i)
        return cls(
            policies,
            {name: tuple(found) for name, found in by_name.items()},
            tuple(any_name),
            tuple(policies[i] for i in any_name),
        )

    def get(self, name: str) -> tuple[Policy, ...]:
        named = self.by_name.get(name)
        if named is None:
            return self.unnamed
        return _pick(self.policies, (named, self.any_name))


def _pick(policies: tuple[Policy, ...], positions: Iterable[tuple[int, ...]]) -> tuple[Policy, ...]:
    """The policies at the union of disjoint ``positions``, in their order."""
    return tuple(policies[i] for i in sorted(i for part in positions for i in part))


@dataclass(frozen=True, slots=True)
class Reach:
    """One type's policies, indexed by the namespaces and names they may reach."""

    policies: tuple[Policy, ...]
    #: Positions of the policies limited to a namespace, by namespace: a LifecyclePolicy's
    #: own, and each literal name of a ClusterLifecyclePolicy's ``namespaces``.
    _by_namespace: dict[str | None, tuple[int, ...]]
    #: Cluster policies without ``namespaces`` or with a glob among them: every namespace.
    _everywhere: tuple[int, ...]
    #: Every cluster policy: all of them may reach a cluster-scoped object (a Namespace is
    #: matched by its own name).
    _cluster: tuple[int, ...]
    _memo: dict[str | None, _Named] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def of(cls, policies: tuple[Policy, ...]) -> Reach:
        """One pass over ``policies`` (those of one type, in the order answers keep)."""
        by_namespace: dict[str | None, list[int]] = {}
        everywhere: list[int] = []
        cluster: list[int] = []
        for i, policy in enumerate(policies):
            if policy.ref.kind is PolicyKind.NAMESPACED:
                by_namespace.setdefault(policy.ref.namespace, []).append(i)
                continue
            cluster.append(i)
            if _literal(policy.namespaces):
                for namespace in set(policy.namespaces):
                    by_namespace.setdefault(namespace, []).append(i)
            else:
                everywhere.append(i)
        return cls(
            policies,
            {namespace: tuple(found) for namespace, found in by_namespace.items()},
            tuple(everywhere),
            tuple(cluster),
        )

    @property
    def everything(self) -> bool:
        """Some policy may reach every object of the type: a cluster policy without literal
        ``namespaces`` and without literal ``names`` (no namespace or name rules one out)."""
        return any(not _literal(self.policies[i].names) for i in self._everywhere)

    def _named(self, namespace: str | None) -> _Named:
        found = self._memo.get(namespace)
        if found is None:
            wide = self._cluster if namespace is None else self._everywhere
            local = self._by_namespace.get(namespace, ())
            found = _Named.of(_pick(self.policies, (local, wide)))
            self._memo[namespace] = found
        return found

    def in_namespace(self, namespace: str | None) -> tuple[Policy, ...]:
        """The policies that may match some object in ``namespace`` (None: a cluster-scoped
        object), less a LifecyclePolicy of another namespace and a ClusterLifecyclePolicy
        whose ``namespaces`` are all literal names, none of them this one."""
        return self._named(namespace).policies

    def reaches(self, namespace: str | None, name: str) -> bool:
        """Whether :meth:`named` is not empty, without building it (asked for every object
        listed while a policy names objects of the type)."""
        found = self._memo.get(namespace)
        if found is None:
            found = self._named(namespace)
        return bool(found.unnamed) or name in found.by_name

    def named(self, namespace: str | None, name: str) -> tuple[Policy, ...]:
        """:meth:`in_namespace` less the policies whose ``names`` are all literal names,
        none of them ``name``."""
        return self._named(namespace).get(name)
