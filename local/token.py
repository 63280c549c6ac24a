"""`python -m local.token SUBJECT [--ttl SECONDS] [--service]`: print a dev bearer token for
the local API; with --service, the service principal's (scope image-jobs/service)."""
from __future__ import annotations

import argparse
import os
import time

from chalicelib.config import Settings
from chalicelib.http.auth import SERVICE_SCOPE, mint_token


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("subject", help="the owner of the jobs made with this token")
    parser.add_argument("--ttl", type=int, default=24 * 3600, help="seconds until it expires")
    parser.add_argument("--service", action="store_true",
                        help=f"the app's backend: scope {SERVICE_SCOPE} (the /service/ routes only)")
    args = parser.parse_args()
    # A token for the local runner, which may use the default secret (config.py).
    settings = Settings.from_environ({**os.environ, "LOCAL_RUNNER": "1"})
    print(mint_token(args.subject, settings.jwt_secret, args.ttl, int(time.time()),
                     scope=SERVICE_SCOPE if args.service else None))


if __name__ == "__main__":
    main()
