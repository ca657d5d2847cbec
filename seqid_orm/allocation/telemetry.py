"""OpenTelemetry metrics of allocation, through ``opentelemetry-api`` only (the extra ``otel``).

seqid records through the API and never configures it: the application installs an SDK
``MeterProvider`` and an exporter (Prometheus, OTLP), as OpenTelemetry asks of libraries
(opentelemetry.io/docs/concepts/instrumentation/libraries/).  Without the API installed every
function here does nothing; with the API and no SDK the calls reach OpenTelemetry's no-op meter.

The hot paths pay nothing: ids issued, what is left of a block, leases held and their time left
are *observed* when the reader collects, from the live objects' ``stats()``; only reservations
(their duration) and refusals are recorded as they happen, once per block or per failure.

Instruments (names and units after OpenTelemetry's semantic conventions: dot-separated,
UCUM units, ``{annotation}`` counts, ``error.type`` for the failure's class):

* ``seqid.ids.issued`` — observable counter, ``{id}``: by ``seqid.sequence`` and ``seqid.store``, or ``seqid.worker_id``
  for Snowflakes (observed once any ticket sequence or lease exists, or :func:`enabled` was called:
  a process of configured Snowflakes alone calls it once);
* ``seqid.reservation.duration`` — histogram, ``s``: one per block reservation, by
  ``seqid.sequence`` and ``error.type`` when it failed;
* ``seqid.block.remaining`` — observable gauge, ``{id}``: values left in memory (current block and
  the prefetched one), by ``seqid.sequence`` and ``seqid.store`` (its servers), summed over the
  live objects of one sequence;
* ``seqid.leases.held`` — observable up-down counter, ``{lease}``: by ``seqid.namespace`` and ``seqid.store``;
* ``seqid.lease.time_left`` — observable gauge, ``s``: until the held lease must have been
  renewed, by ``seqid.namespace``, ``seqid.store`` and ``seqid.worker_id``;
* ``seqid.refusals`` — counter, ``{refusal}``: typed refusals (a counter gone back, a lease lost,
  a store that timed out, ...), by ``error.type`` and ``seqid.sequence`` or ``seqid.namespace``.

May import the standard library and :mod:`seqid_orm.ids`; ``opentelemetry`` when installed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..ids.snowflake import generators

__all__ = ["enabled", "record_refusal", "record_reservation", "watch"]

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_lock = threading.Lock()
_state: dict[str, Any] = {}
_sources: dict[str, Callable[[], Iterable[tuple[str, float, dict[str, str | int]]]]] = {}


def enabled() -> bool:
    """Whether ``opentelemetry-api`` is installed (the instruments exist once it is)."""
    return _meter() is not None


def _meter() -> Any:
    if "meter" in _state:
        return _state["meter"]
    with _lock:
        if "meter" not in _state:
            meter = None
            metrics: Any = None
            # no opentelemetry-api: none at all, or only other parts of its namespace package
            # (opentelemetry-proto alone, as some exporters install, made every call fail)
            with contextlib.suppress(ImportError):
                from opentelemetry import metrics
            if metrics is not None:
                meter = metrics.get_meter("seqid_orm")
                try:  # seconds, not the SDK's default buckets (0 to 10,000, made for milliseconds)
                    _state["reservation"] = meter.create_histogram(
                        "seqid.reservation.duration",
                        unit="s",
                        description="Time one block reservation took",
                        explicit_bucket_boundaries_advisory=_BUCKETS,
                    )
                except TypeError:  # opentelemetry-api before 1.23 takes no advisory
                    _state["reservation"] = meter.create_histogram(
                        "seqid.reservation.duration", unit="s", description="Time one block reservation took"
                    )
                _state["refusals"] = meter.create_counter(
                    "seqid.refusals", unit="{refusal}", description="Typed refusals: ids not made rather than repeated"
                )
                _observe(meter, metrics)
                _sources["snowflakes"] = _snowflakes
            _state["meter"] = meter
    return _state["meter"]


def _observe(meter: Any, metrics: Any) -> None:
    """The observable instruments: their callbacks read every watched source when collected."""

    def callback(instrument: str) -> Callable[[Any], Iterator[Any]]:
        # Live objects alike (two TicketSequence objects of one sequence on one store, say) are one
        # series: an observable instrument keeps one value per attribute set, and reporting each
        # object's in turn showed whichever came last (1,300 where 2,800 ids were in memory).  Counts
        # add up; a lease's time left is the soonest.
        combine: Callable[[float, float], float] = min if instrument == "seqid.lease.time_left" else float.__add__

        def read(_options: Any) -> Iterator[Any]:
            series: dict[tuple[tuple[str, str | int], ...], float] = {}
            for source in list(_sources.values()):
                for name, value, attributes in source():
                    if name == instrument:
                        key = tuple(sorted(attributes.items()))
                        series[key] = combine(series[key], float(value)) if key in series else float(value)
            for key, value in series.items():
                yield metrics.Observation(value, dict(key))

        return read

    meter.create_observable_counter(
        "seqid.ids.issued", [callback("seqid.ids.issued")], unit="{id}", description="Ids handed out"
    )
    meter.create_observable_gauge(
        "seqid.block.remaining", [callback("seqid.block.remaining")], unit="{id}", description="Ids left in memory"
    )
    meter.create_observable_up_down_counter(
        "seqid.leases.held", [callback("seqid.leases.held")], unit="{lease}", description="Worker-id leases held"
    )
    meter.create_observable_gauge(
        "seqid.lease.time_left",
        [callback("seqid.lease.time_left")],
        unit="s",
        description="Seconds until the held lease must have been renewed",
    )


def _snowflakes() -> Iterator[tuple[str, float, dict[str, str | int]]]:
    for generator in generators():
        stats = generator.stats()
        if stats.ids_issued:  # a generator that made nothing (a decoder's, say) is no series
            yield "seqid.ids.issued", stats.ids_issued, {"seqid.worker_id": stats.worker_id}


def watch(kind: str, read: Callable[[], Iterable[tuple[str, float, dict[str, str | int]]]]) -> None:
    """Observe ``read()`` — ``(instrument, value, attributes)`` of every live object of ``kind`` —
    whenever the metrics are collected (one reader per kind: tickets, leases, Snowflakes)."""
    if _meter() is not None:
        _sources[kind] = read


def record_reservation(sequence: str, seconds: float, error: BaseException | None = None) -> None:
    """One block reservation's duration (``error``: the refusal it ended in)."""
    if _meter() is None:
        return
    attributes: dict[str, str] = {"seqid.sequence": sequence}
    if error is not None:
        attributes["error.type"] = type(error).__name__
    _state["reservation"].record(seconds, attributes)


def record_refusal(error: BaseException, **attributes: str) -> None:
    """A typed refusal, with where it happened (``sequence=``, ``namespace=``)."""
    if _meter() is None:
        return
    labels = {"error.type": type(error).__name__, **{f"seqid.{k}": v for k, v in attributes.items()}}
    _state["refusals"].add(1, labels)
