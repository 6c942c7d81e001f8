"""The OpenTelemetry SDK's in-memory exporter and metric reader, handed to
`acp_fast.telemetry.instrument()` for one test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import acp_fast as acp
import pytest
from conftest import TEST_TRANSFER_LIMITS

sdk = pytest.importorskip("opentelemetry.sdk", reason="the telemetry tests need opentelemetry-sdk")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

DEMO = ("-m", "acp_fast.demo_agent")


@dataclass
class Otel:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def span(self, prefix: str) -> ReadableSpan:
        found = [s for s in self.spans() if s.name.startswith(prefix)]
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def metrics(self) -> dict[str, Any]:
        """Metric name -> its data points."""
        data = self.reader.get_metrics_data()
        found: dict[str, Any] = {}
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found[metric.name] = list(metric.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    acp.telemetry.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        yield Otel(exporter, reader, tracer_provider, meter_provider)
    finally:
        acp.telemetry.uninstrument()
        meter_provider.shutdown()


class Recorder:
    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.permissions: list[acp.PermissionRequest] = []

    def on_update(self, update: Any) -> None:
        self.updates.append(update)

    def on_permission_commit(self, request: acp.PermissionRequest) -> None:
        self.permissions.append(request)


def options(**more: Any) -> dict[str, Any]:
    return {
        "reader_limits": acp.DEFAULT_READER_LIMITS,
        "transfer_limits": TEST_TRANSFER_LIMITS,
        "transport_epoch": 1,
        "observer": Recorder(),
        **more,
    }


def demo_client(**more: Any) -> acp.Client:
    return acp.Client(sys.executable, args=DEMO, **options(**more))
