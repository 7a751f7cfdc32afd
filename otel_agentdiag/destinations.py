"""Resolve the pipeline's destinations (the local store, OTLP): each one's policy and hash key, failing closed.

A destination is off, with one logged reason, when what the machine holds is refused: a store that is not the
user's, or a weak key or key file. A bad *argument* (policy, key) raises ``ValueError`` instead.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from otel_agentdiag import environment_variables as env
from otel_agentdiag._internal.trust import UntrustedPathError
from otel_agentdiag.options import AgentDiagOptions
from otel_agentdiag.redaction import hash_keys, hashing
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.policy_file import resolve_policy
from otel_agentdiag.redaction.presets import LOCAL, STRICT
from otel_agentdiag.redaction.rules import PolicyError
from otel_agentdiag.storage.trusted import check_store_files

_logger = logging.getLogger(__name__)

__all__ = ["LOCAL_DESTINATION", "OTLP_DESTINATION", "Destination", "resolve_destinations"]

LOCAL_DESTINATION = "local"
OTLP_DESTINATION = "otlp"

_Key = tuple[bytes, str]
"""A key and where it came from (never the key itself in any message)."""


@dataclass(frozen=True)
class Destination:
    """One branch of the pipeline as resolved: where spans go, under which policy and which key."""

    name: str
    """``local`` (the SQLite store) or ``otlp``."""
    policy: Policy
    policy_source: str
    """Where the policy came from: ``default``, ``argument``, or the environment variable that named it."""
    hasher: hashing.IdHasher
    key_source: str
    """Where the key came from (never the key): ``argument``, an environment variable, ``key file <path>``,
    or ``ephemeral`` (this process only)."""


def _policy(
    destination: str, argument: Policy | str | os.PathLike[str] | None, variable: str, default: Policy
) -> tuple[Policy, str]:
    """Argument (errors raise) > environment (errors log and fall back to strict) > default."""
    if argument is not None:
        policy, source = resolve_policy(argument), "argument"
    else:
        value = os.environ.get(variable)
        if not value:
            policy, source = default, "default"
        else:
            try:
                policy, source = resolve_policy(value), variable
                _check_destination(destination, policy)
            except PolicyError as exc:
                _logger.error("otel-agentdiag: %s is unusable (%s); using the strict policy", variable, exc)
                return STRICT, f"{variable} (unusable; strict used)"
    _check_destination(destination, policy)
    return policy, source


def _check_destination(destination: str, policy: Policy) -> None:
    if destination != LOCAL_DESTINATION and policy.summary == "debug":
        raise PolicyError(f"summary='debug' lists removed key names and is for the local store only, not {destination}")


def _hasher(key: bytes, policy: Policy, cache: dict[tuple[bytes, str], hashing.IdHasher]) -> hashing.IdHasher:
    hasher = cache.get((key, policy.hash_function))
    if hasher is None:
        if policy.hash_function != hashing.ALGORITHM:
            _logger.warning(
                "otel-agentdiag: policy %r uses unkeyed %s digests: guessable IDs (e-mail addresses, numbers) "
                "can be recovered by hashing candidates",
                policy.name,
                policy.hash_function,
            )
        hasher = cache[(key, policy.hash_function)] = hashing.IdHasher(key, algorithm=policy.hash_function)
    return hasher


class _Refusals:
    """What was refused while resolving, once per cause, and the first exception (raised when nobody collects)."""

    def __init__(self) -> None:
        self.found: dict[str, set[str]] = {}
        self.first: list[Exception] = []

    def refuse(self, exc: Exception, destinations: set[str]) -> None:
        self.first.append(exc)
        self.found.setdefault(str(exc), set()).update(destinations)

    def report(self, refusals: list[hash_keys.Refusal] | None) -> None:
        if self.first and refusals is None:
            raise self.first[0]
        if refusals is not None:
            refusals.extend(hash_keys.Refusal(reason, tuple(sorted(names))) for reason, names in self.found.items())


def resolve_destinations(
    options: AgentDiagOptions,
    *,
    hash_key: str | bytes | None = None,
    otlp_hash_key: str | bytes | None = None,
    local_policy: Policy | str | os.PathLike[str] | None = None,
    otlp_policy: Policy | str | os.PathLike[str] | None = None,
    create_key_file: bool = True,
    refusals: list[hash_keys.Refusal] | None = None,
) -> tuple[Destination, ...]:
    """The destinations ``configure()`` builds for ``options``: policy and key per branch.

    ``create_key_file=False`` (used by ``agentdiag doctor``) never writes a key file: a missing one is
    replaced by a key for this process only, and the source says so.

    Fail closed: a store that is not ours (:mod:`otel_agentdiag.storage.trusted`) turns the local destination
    off; a key that is refused (weak, from ``AGENTDIAG_HASH_KEY``/``AGENTDIAG_OTLP_HASH_KEY``, or a key file that
    is weak or not ours) turns off every destination that would have used it. A refused key is never replaced
    by another. Each refusal is appended to ``refusals`` (one per cause) when it is given; otherwise the first
    one is raised (:class:`~otel_agentdiag._internal.trust.UntrustedPathError` or
    :class:`~otel_agentdiag.redaction.WeakKeyError`, both ``ValueError``). A weak or mistyped key *argument*
    always raises ``ValueError``.
    """
    wants_otlp = options.otlp_endpoint is not None or options.otlp_from_env
    if options.store_path is None and not wants_otlp:
        return ()
    found = _Refusals()
    # Arguments first: a bad one raises before anything else is looked at.
    local_argument = hash_keys.argument_key(hash_key, "hash_key")
    otlp_argument = hash_keys.argument_key(otlp_hash_key, "otlp_hash_key")
    local_wanted = _store_trusted(options.store_path, found)
    otlp_key, otlp_refused = _otlp_key(otlp_argument, found) if wants_otlp else (None, False)
    users = ({LOCAL_DESTINATION} if options.store_path is not None else set()) | (
        {OTLP_DESTINATION} if wants_otlp and otlp_key is None and not otlp_refused else set()
    )
    key: _Key | None = None
    if local_wanted or OTLP_DESTINATION in users:
        try:
            key = (local_argument, "argument") if local_argument is not None else None
            key = key or hash_keys.resolve_key(None, options.store_path, create_key_file=create_key_file)
        except hash_keys.REFUSED as exc:
            found.refuse(exc, users)
    found.report(refusals)
    cache: dict[tuple[bytes, str], hashing.IdHasher] = {}
    destinations = []
    if local_wanted and key is not None:
        policy, source = _policy(LOCAL_DESTINATION, local_policy, env.AGENTDIAG_LOCAL_POLICY, LOCAL)
        destinations.append(Destination(LOCAL_DESTINATION, policy, source, _hasher(key[0], policy, cache), key[1]))
    chosen = otlp_key or key
    if wants_otlp and not otlp_refused and chosen is not None:
        policy, source = _policy(OTLP_DESTINATION, otlp_policy, env.AGENTDIAG_OTLP_POLICY, STRICT)
        destinations.append(Destination(OTLP_DESTINATION, policy, source, _hasher(chosen[0], policy, cache), chosen[1]))
    return tuple(destinations)


def _store_trusted(store_path: Path | None, found: _Refusals) -> bool:
    """Whether the local destination is wanted and its files are the user's (a refusal is recorded if not)."""
    if store_path is None:
        return False
    try:
        check_store_files(store_path)
    except UntrustedPathError as exc:
        found.refuse(exc, {LOCAL_DESTINATION})
        return False
    return True


def _otlp_key(argument: bytes | None, found: _Refusals) -> tuple[_Key | None, bool]:
    """The OTLP branch's own key (argument > ``AGENTDIAG_OTLP_HASH_KEY``), None to share the local one; and
    whether a key for it was refused (then the branch is off: a refused key is never replaced)."""
    if argument is not None:
        return (argument, "argument"), False
    try:
        from_env = hash_keys.environment_key(env.AGENTDIAG_OTLP_HASH_KEY)
    except hash_keys.REFUSED as exc:
        found.refuse(exc, {OTLP_DESTINATION})
        return None, True
    return (None if from_env is None else (from_env, env.AGENTDIAG_OTLP_HASH_KEY)), False
