"""The one exception tree of k2k.

Every error k2k raises on purpose derives from :class:`K2KError`; the CLI catches that root,
prints one line and exits non-zero (see ``k2k.cli``). Anything else reaching the CLI is a bug.
The classes defined elsewhere live beside the code that raises them (module in
brackets). Those marked *internal* are signals between parts of k2k: something inside k2k
catches each one, so the command line never shows it as itself.

::

    K2KError
    ├── ConfigError               the pipeline file or a flag is wrong (user fixes the input)
    │   └── OffsetInputError      [admin.offsets] a flag of ``k2k offsets`` names a bad place
    ├── ClusterError              a cluster cannot be reached or refuses us (operator action)
    │   ├── TopicError            a topic is missing or misconfigured on a cluster
    │   ├── Unavailable           a cluster did not answer in time: transient, waited out
    │   ├── SyncTimeout           [kafka.tail] a control topic was not read to its end in time
    │   └── GroupError            [kafka.groups] an offsets request for one group failed
    ├── ReplicationError          a record or batch could not be replicated (carries a locator)
    │   ├── SchemaMappingError    a record's schema id could not be mapped to the target registry
    │   └── TransformFailed       a transform step failed on a record (``onError: fail``)
    ├── ControlRecordError        a control-topic record cannot be decoded
    ├── VerifyMismatch            ``k2k verify`` found the target differing from the source
    ├── OffsetMappingError        the Offset Mapping app met a case its policy says to fail on
    ├── StandDown                 [coordination.assignment] a newer session took our member name
    ├── MembersAlive              [admin.offsets] refused: members of the pipeline are alive
    ├── JoinedDuringWrite         [admin.offsets] written, but a member came alive meanwhile
    ├── NotConfirmed              [admin.offsets] the plan was not confirmed: nothing written
    ├── CutoverRefused            [migration.cutover] the cut-over cannot go on as asked
    ├── SourceStillMoving         [migration.cutpoint] the source did not stand still in time
    ├── NoForkPoint               [migration.fork] a reverse run found no finished cut-over
    ├── LocalClusterError         the embedded Kafka installation or brokers misbehave
    ├── PackageError              ``k2k package`` cannot build the executors' environment
    ├── Fenced                    internal [pipeline.task.faults] another owner took the
    │                             runner's partitions: its summary says so, the planner re-plans
    ├── DriverGone                internal [pipeline.task.faults] the lease's driver stopped
    │                             answering: the runner commits nothing and ends
    ├── CutOver                   internal [pipeline.driver.cutover] k2k cutover drained the
    │                             pipeline before this member claimed: the run ends cleanly
    └── RegistryFailure           internal [schemamapping.registry] a registry call failed for
        │                         good: raised again as an error carrying its message
        ├── RegistryUnavailable   internal [schemamapping.registry] no URL answered in time
        ├── RegistryRefused       internal [schemamapping.registry] an error retrying cannot fix
        ├── _Retry                internal [schemamapping.registry] one attempt failed
        │   └── _TlsRefused       internal [schemamapping.registry] a TLS handshake failed
        ├── _NameError            internal [schemamapping.mapper] no record name for a strategy
        └── _TooDeep              internal [schemamapping.mapper] references nest too deep
"""

from __future__ import annotations

__all__ = [
    "ClusterError",
    "ConfigError",
    "ControlRecordError",
    "K2KError",
    "LocalClusterError",
    "OffsetMappingError",
    "PackageError",
    "ReplicationError",
    "SchemaMappingError",
    "TopicError",
    "TransformFailed",
    "Unavailable",
    "VerifyMismatch",
]


class K2KError(Exception):
    """Root of every deliberate k2k error. ``str(err)`` is the one-line message for users."""


class ConfigError(K2KError):
    """Raised when the pipeline configuration or a CLI flag is invalid.

    ``problems`` holds one line per problem, each naming the dotted key path, the offending
    value and what is expected, so ``k2k validate`` can print all of them at once.
    """

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


class ClusterError(K2KError):
    """Raised when a cluster (``source`` or ``target``) cannot be reached or rejects a request.

    Operator action: check ``bootstrap.servers``, network reachability and credentials.
    """


class TopicError(ClusterError):
    """Raised when a topic is missing, or a control topic has the wrong settings."""


class Unavailable(ClusterError):
    """Raised when a cluster did not answer in time: down, restarting, or without a leader
    for a partition. Transient: a running pipeline waits for the cluster and carries on
    (``errorHandling.maxOutage``); at start-up, or past that bound, it is a one-line error.
    """


class ReplicationError(K2KError):
    """Raised when records cannot be delivered to the target (e.g. a record too large).

    The message carries the source locator ``topic[partition]@offset`` when one is known.
    """


class SchemaMappingError(ReplicationError):
    """Raised when a record's schema id cannot be mapped (``features.schemaMapping``): a
    registry that did not answer within ``schemaMapping.retryTimeout``, a schema id the source
    registry does not know, a schema the target registry refuses (incompatible), or a record
    not in wire format under ``onNonWireFormat: fail``. The record is not written; exactly-once
    aborts the open transaction.

    The message names the record ``topic[partition]@offset``, the subject and the source id.
    Operator action: check the registry named, or the subject's compatibility on the target.
    """


class TransformFailed(ReplicationError):
    """Raised when a ``replication[].transforms`` step fails on a record and its ``onError``
    is ``fail``: an expression error, a value the step cannot rewrite, data that is not JSON
    under ``nonJson: fail``. Nothing of the record is written.

    The message names the record ``topic[partition]@offset``, the step and the reason.
    Operator action: fix the step (``has()`` for optional headers), or set ``onError: skip``.
    """


class ControlRecordError(K2KError):
    """Raised when a control-topic record cannot be decoded (corrupt or unknown version).

    The message names the control topic, partition and offset of the bad record.
    """


class VerifyMismatch(K2KError):
    """Raised by ``k2k verify`` when the target does not hold what the source holds; the
    message is the one-line summary (the report itself names each place).

    Operator action: read the report; do not cut over until it matches.
    """


class OffsetMappingError(K2KError):
    """Raised by the Offset Mapping app when a policy of ``errorHandling`` says ``fail``
    (a source partition mapped to several targets, a target group with active members).

    Operator action: the message names the group, the partition and the policy to change.
    """


class LocalClusterError(K2KError):
    """Raised when the embedded Kafka clusters cannot be installed, started or stopped."""


class PackageError(K2KError):
    """Raised when ``k2k package`` cannot build the executors' environment archive (the
    message names the step: the virtualenv, pip, or venv-pack)."""
