"""The local runner: embedded AWS-compatible services, `chalice local`, the worker. Not deployed."""
