from tests.telemetry.kit import otel

__all__ = ["otel"]
