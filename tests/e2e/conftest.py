"""The end-to-end tests use the session's `runner` fixture, in tests/conftest.py."""
