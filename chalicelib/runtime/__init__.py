"""What every invocation shares, whatever triggered it: its time budget, correlation id,
logs and metrics. Imports neither imaging/ nor http/."""
