"""The status order and the terminal set are the contract's ("Statuses"), and the server, the
Python SDK and the JavaScript package each hold that one rule: their copies are compared here
with the contract's diagram and sentence, read from docs/contract.md itself. (Each client is
a package of its own and cannot import the server's; so the copies stay, and this test is
what keeps them one rule.)"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))


def contract() -> tuple[dict[str, int], set[str]]:
    """(status -> its step along the diagram, the terminal set) as docs/contract.md draws them."""
    text = (ROOT / "docs" / "contract.md").read_text()
    section = text.split("## Statuses\n", 1)[1].split("\n## ", 1)[0]
    diagram = section.split("```")[1]
    first = diagram.strip().splitlines()[0]  # awaiting_upload ──upload──▶ queued ──claim──▶ processing ──▶ ready
    line = [word for word in re.findall(r"[a-z_]+", first) if word not in ("upload", "claim", "cancel")]
    steps = {status: step for step, status in enumerate(line)}
    ends = set(re.findall(r"▶ ([a-z_]+)", diagram)) - set(line[:-1])
    terminal = set(re.findall(r"`([a-z_]+)`", section.split("are terminal")[0].splitlines()[-1]))
    for end in ends:
        steps[end] = steps[line[-1]]
    return steps, terminal


def test_the_contract_is_read_as_drawn():
    steps, terminal = contract()
    assert steps == {"awaiting_upload": 0, "queued": 1, "processing": 2, "ready": 3, "failed": 3, "cancelled": 3}
    assert terminal == {"ready", "failed", "cancelled"}


def test_the_server_holds_the_contracts_rule():
    from chalicelib.domain import jobs

    steps, terminal = contract()
    assert {s.value: step for s, step in jobs._STEP.items()} == steps
    assert {s.value for s in jobs.TERMINAL} == terminal


def test_the_python_sdk_holds_the_contracts_rule():
    from image_jobs import job, push

    steps, terminal = contract()
    assert push._STEP == steps
    assert set(job.TERMINAL) == terminal


def test_the_javascript_package_holds_the_contracts_rule():
    steps, terminal = contract()
    source = ROOT / "clients" / "js" / "src"
    step = re.search(r"const STEP: Record<string, number> = \{([^}]*)\}", (source / "push.ts").read_text())
    assert step, "push.ts's STEP table moved: follow it here"
    assert {k: int(v) for k, v in re.findall(r"(\w+): (\d+)", step.group(1))} == steps
    job = (source / "job.ts").read_text()
    names = dict(re.findall(r"(\w+): \"(\w+)\"", job.split("export const Status", 1)[1].split("});", 1)[0]))
    held = re.search(r"export const TERMINAL: ReadonlySet<string> = new Set\(\[([^\]]*)\]\)", job)
    assert held, "job.ts's TERMINAL moved: follow it here"
    assert {names[name] for name in re.findall(r"Status\.(\w+)", held.group(1))} == terminal
