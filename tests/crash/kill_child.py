"""A child process that runs one step of the service and SIGKILLs itself at an external call.

    python -m tests.crash.kill_child upload objects.put 0 after
    python -m tests.crash.kill_child worker jobs.finish_attempt 0 before

Settings come from the environment, as in the runner. A real kill: no `finally`, no
compensation, no flushed buffer; the parent sees return code -9.
"""
from __future__ import annotations

import os
import signal
import sys

from chalicelib.bootstrap import build_use_cases
from chalicelib.config import Settings
from chalicelib.usecases import UseCases
from tests.crash.harness import Injector, image_of
from tests.fakes import fake_context


class KillAt(Injector):
    """SIGKILL this process before or after the nth call named `call`."""

    def __init__(self, call: str, nth: int, when: str):
        super().__init__()
        self.target, self.nth, self.when, self.seen = call, nth, when, 0

    def run(self, name, call):
        hit = name == self.target and self.seen == self.nth
        if name == self.target:
            self.seen += 1
        if hit and self.when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = call()
        if hit and self.when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return result


def main(step: str, call: str, nth: str, when: str) -> int:
    settings = Settings.from_environ(os.environ)
    real = build_use_cases(settings).ctx
    injector = KillAt(call, int(nth), when)
    use_cases = UseCases(fake_context(settings=settings, jobs=injector.wrap("jobs", real.jobs),
                                      objects=injector.wrap("objects", real.objects),
                                      publisher=injector.wrap("queue", real.publisher),
                                      backlog=injector.wrap("queue", real.backlog)))
    if step == "upload":
        use_cases.uploads.accept_upload("alice", image_of(os.environ["CRASH_IDEMPOTENCY_KEY"]), os.environ["CRASH_IDEMPOTENCY_KEY"])
    elif step == "worker":
        import boto3

        sqs = boto3.session.Session().client("sqs", region_name=settings.region,
                                             endpoint_url=settings.endpoint_url)
        url = sqs.get_queue_url(QueueName=settings.events_queue_name)["QueueUrl"]
        (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1,
                                         WaitTimeSeconds=5)["Messages"]
        use_cases.worker.process_storage_message(message["Body"])
    else:
        raise SystemExit(f"unknown step {step}")
    return 0  # reached only if the kill point was never hit


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
