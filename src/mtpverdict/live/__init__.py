"""After promotion: the live seat against its decision (Prometheus rules from it, and `watch`)."""
