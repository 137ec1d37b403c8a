"""Monitoring from the spec: PromQL, recording rules and alerts, the Grafana dashboard, the objects that carry them."""
