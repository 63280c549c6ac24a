"""Ceph's RADOS Gateway on this machine (`STORAGE=rgw make run`): S3-compatible storage that
notifies RabbitMQ itself, over AMQP, from Debian's own packages; no Docker, no systemd.

One monitor, one OSD holding its data in memory (memstore: gone when it stops) and one
gateway, all on 127.0.0.1, their state in one temporary directory, all children of the
caller and stopped with it. `python3 -m local.rgw --install` installs the packages only
(what `make test` does once); it needs nothing but the standard library.

Why the runner's topic is not persistent: with a persistent topic (the gateway keeps events
in RADOS until the broker confirms them) Ceph 16.2.15's gateway dies of SIGSEGV within
minutes on this machine (4 runs of 4, 40 s to 3.5 min after start, under a put a second);
without one, or with a topic that is not persistent, 10 minutes without a crash. gdb, with
no debug symbols to be had: thread msgr-worker-2, DispatchQueue::fast_dispatch -> librados
(an OSD reply's completion) -> a jump to a freed address, so an operation of the
persistent-queue code whose completion outlives it. glibc's rseq off did not change it, and
the persistent queue has no setting in Pacific to try (its timings are constants: a new
persistent topic is read at the gateway's start and every 30 s). Without persistence the
gateway drops what it cannot send while RabbitMQ is away, and the sweeper resends it.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from local.ports import free_port
from local.services import spawn, stop, wait_for_port

PACKAGES = ("ceph-mon", "ceph-osd", "radosgw")
COMMANDS = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph")
USER = "image-jobs"
START_TIMEOUT = 60


class RgwError(RuntimeError):
    """The gateway could not be installed or started; the message says what to do."""


def installed() -> bool:
    return all(shutil.which(command) for command in COMMANDS)


def install() -> None:
    """Debian's packages, as `make test` installs chromium: root runs apt-get itself."""
    if installed():
        return
    if not shutil.which("apt-get"):
        raise RgwError(f"the RADOS Gateway needs {', '.join(PACKAGES)}: install them (Debian, Ubuntu: "
                       "apt-get install --no-install-recommends ceph-mon ceph-osd radosgw)")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update"],
                    ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]):
        if subprocess.run(sudo + command, env=env).returncode != 0:
            raise RgwError(f"`{' '.join(sudo + command)}` failed")


def _wait_for_port(port: int, timeout: float, process: subprocess.Popen) -> None:
    try:
        wait_for_port("127.0.0.1", port, timeout, process)
    except (RuntimeError, TimeoutError) as error:
        raise RgwError(str(error)) from None


# Each setting here is one that a one-machine cluster needs (../shared/notes in the issue):
# loopback only, no authentication between the daemons (throw-away state), one replica,
# and a monitor that commits at once (the gateway's first start makes many commands).
CONF = """\
[global]
fsid = {fsid}
mon host = 127.0.0.1:{mon_port}
mon initial members = a
public addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
osd crush chooseleaf type = 0
run dir = {dir}/run
chdir = {dir}
log file = {dir}/$name.log
admin socket = {dir}/run/$name.asok
pid file = {dir}/run/$name.pid
[mon]
mon data = {dir}/mon
paxos propose interval = 0.05
paxos min wait = 0.01
[osd]
osd data = {dir}/osd
osd objectstore = memstore
osd journal = {dir}/osd/journal
[client.rgw]
# Without cephx the gateway must not ask the monitor for it (or it waits 300 s).
ms mon client mode = crc
rgw frontends = beast endpoint=127.0.0.1:{port}
rgw data = {dir}/rgw
"""


@dataclass
class RgwCluster:
    """A running one-node cluster; `endpoint` is its S3 API. The gateway's user has the keys
    given (the runner passes its AWS ones, so that every client signs alike)."""

    port: int
    access_key: str
    secret_key: str
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="image-jobs-rgw-")))
    mon_port: int = field(default_factory=free_port)
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def conf(self) -> Path:
        return self.directory / "ceph.conf"

    def _run(self, *command: str) -> str:
        done = subprocess.run([command[0], "-c", str(self.conf), *command[1:]], capture_output=True,
                              text=True, timeout=START_TIMEOUT)
        if done.returncode != 0:
            raise RgwError(f"{' '.join(command)} failed: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def _daemon(self, name: str, *command: str) -> None:
        # -f: in the foreground, a child of ours (logs go to the state directory). Killed
        # with its parent by SIGKILL, because a gateway told to stop after its monitor has
        # gone waits for the monitor; its state is throw-away (only the directory stays).
        self.daemons[name] = spawn([command[0], "-f", "-c", str(self.conf), *command[1:]],
                                   death_signal=signal.SIGKILL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, cwd=self.directory)

    def start(self) -> "RgwCluster":
        if not installed():
            raise RgwError(f"{', '.join(PACKAGES)} are not installed: `make rgw-install` installs them")
        for sub in ("mon", "osd", "rgw", "run"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        fsid = str(uuid.uuid4())
        self.conf.write_text(CONF.format(fsid=fsid, mon_port=self.mon_port, port=self.port,
                                         dir=self.directory))
        try:
            monmap = self.directory / "monmap"
            subprocess.run(["monmaptool", "--create", "--add", "a", f"127.0.0.1:{self.mon_port}",
                            "--fsid", fsid, str(monmap)], check=True, capture_output=True)
            self._run("ceph-mon", "--mkfs", "-i", "a", "--monmap", str(monmap))
            self._daemon("mon", "ceph-mon", "-i", "a")
            osd = self._run("ceph", "--connect-timeout", "20", "osd", "create").strip()
            self._run("ceph-osd", "-i", osd, "--mkfs", "--osd-uuid", str(uuid.uuid4()))
            self._daemon("osd", "ceph-osd", "-i", osd)
            self._run("radosgw-admin", "-n", "client.rgw", "user", "create", "--uid", USER,
                      "--display-name", USER, "--access-key", self.access_key,
                      "--secret-key", self.secret_key)
            self.start_gateway()
        except BaseException:
            self.stop()
            raise
        return self

    def start_gateway(self) -> None:
        self._daemon("rgw", "radosgw", "-n", "client.rgw")
        _wait_for_port(self.port, START_TIMEOUT, self.daemons["rgw"])

    def stop_gateway(self) -> None:
        stop(self.daemons.pop("rgw", None))

    def restart_gateway(self) -> None:
        self.stop_gateway()
        self.start_gateway()

    def exited(self) -> Optional[str]:
        """The daemon that has stopped on its own, with how, or None."""
        for name, process in self.daemons.items():
            if process.poll() is not None:
                return f"{name} exited with {process.returncode}"
        return None

    def stop(self) -> None:
        for name in ("rgw", "osd", "mon"):
            stop(self.daemons.pop(name, None))
        shutil.rmtree(self.directory, ignore_errors=True)


def main(argv: list[str]) -> int:
    if argv[1:] == ["--install"]:
        try:
            install()
        except RgwError as error:
            print(error, file=sys.stderr)
            return 1
        return 0
    print("usage: python3 -m local.rgw --install", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
