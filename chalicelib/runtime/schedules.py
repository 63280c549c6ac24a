"""The rate of a schedule (app.py's @app.schedule) from its interval in seconds."""
from __future__ import annotations

from chalice import Rate


def rate(seconds: int) -> Rate:
    """The coarsest whole unit: a schedule in days reads better than one in minutes."""
    for unit, size in ((Rate.DAYS, 86400), (Rate.HOURS, 3600)):
        if seconds % size == 0:
            return Rate(seconds // size, unit=unit)
    return Rate(max(1, seconds // 60), unit=Rate.MINUTES)
