"""API latency against its floor, and the cold start, on the embedded stack.

    python benchmarks/api.py [--rounds 30] [--cold 5] [--size 4000x3000] [--root DIR ...]

For each checkout (`--root`, repeatable; default this one) it starts that checkout's
`python -m local` with only the API (moto's server + `chalice local`, no worker), then one
driver process measures, in interleaved rounds so that every case sees the same machine load,
the second of two calls made back to back (as a client that keeps its connection busy):

  floor          the same storage and table calls made directly with botocore on the same
                 emulator: GET = get_item (consistent) + 2 presigns; POST = a transaction
                 of a conditional put of a job-sized item and the owner's quota-slot update
                 (as accept_upload writes them) + put_object of the same bytes
  use case       the use case called in process (manage.get_job + urls, uploads.accept_upload)
  handler        the Lambda entry point in process: app.app(API Gateway event), with the
                 JWT check, routing and JSON; no HTTP server
  http keep      through `chalice local`, one kept-alive connection (requests.Session)
  http fresh     through `chalice local`, a new connection for each request

POST sends a 12 MP photo-like JPEG of about 1.2 MB as the raw body (--size WxH: another
size). GET reads a ready job.
It also reports the CPU that the API process and the emulator spend per request, read from
/proc/<pid>/stat around each request.

Cold start: `--cold` fresh processes each import `app`, build its use cases and serve one
GET of the ready job through app.app(), in process, against the same emulator; once as on
Lambda (AUTH_MODE=cognito: the event carries the claims API Gateway checked) and once as
`chalice local` runs (AUTH_MODE=jwt: the app checks the HS256 token). Each runs in a venv
holding only what the Lambda package holds (requirements.txt and Chalice's runtime; made
once, kept in ~/.cache/image-jobs-bench/), and for comparison in the dev venv, where moto's
cryptography makes PyJWT import it. The tables give wall and CPU time of each step, and
which heavy packages were imported by then. The target applies to the packaged cold start.

Targets (issue 11): HTTP keep-alive POST and GET <= 1.5x the floor; cold start <= 250 ms.
It is a report: the exit status is 0 even when a target is missed.
"""
from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import stack

SCRIPT = Path(__file__).resolve()
GET_CASES = ("floor", "use case", "handler", "http keep", "http fresh")
POST_CASES = GET_CASES
# Lambda behind API Gateway (the token checked by Cognito), and `chalice local` (HS256 checked here).
COLD_MODES = {"cognito": "as on Lambda: API Gateway checked the token",
              "jwt": "as in chalice local: the app checks the HS256 token"}
# The target is the deployed cold start: with the packages the Lambda holds, and no others.
ENVIRONMENTS = {"packaged": "with only the Lambda package's libraries",
                "dev venv": "in the dev venv (for comparison: moto's extras too)"}
COGNITO_POOL = "arn:aws:cognito-idp:us-east-1:000000000000:userpool/us-east-1_bench"
COGNITO_CLIENT = "bench-app"
# No worker finishes the POSTed jobs, and one owner makes every request: lift the per-owner
# limits, which would otherwise answer 429 after 20 jobs or 40 requests.
UNLIMITED = {"MAX_ACTIVE_JOBS": "1000000", "OWNER_REQUESTS_PER_SECOND": "1000000", "OWNER_BURST": "1000000"}
HEAVY = ("PIL", "pillow_heif", "boto3", "botocore", "pynamodb", "cryptography", "jwt", "structlog",
         "multipart", "chalice.local")


# ---------------------------------------------------------------------------- events


def api_event(method: str, resource: str, path: str, headers: dict, path_params=None,
              body: bytes | None = None) -> dict:
    """The REST API proxy event API Gateway hands the Lambda function."""
    return {
        "resource": resource, "path": path, "httpMethod": method, "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None, "multiValueQueryStringParameters": None,
        "pathParameters": path_params, "stageVariables": None,
        "requestContext": {"httpMethod": method, "resourcePath": resource, "path": path,
                           "stage": "api", "requestId": str(uuid.uuid4())},
        "body": None if body is None else base64.b64encode(body).decode(),
        "isBase64Encoded": body is not None,
    }


def get_event(prefix: str, job_id: str, token: str, claims: dict | None = None) -> dict:
    """claims: what API Gateway's Cognito authorizer passes on, when it checked the token."""
    event = api_event("GET", prefix + "/image-jobs/{job_id}", f"{prefix}/image-jobs/{job_id}",
                      {"authorization": f"Bearer {token}"}, {"job_id": job_id})
    if claims:
        event["requestContext"]["authorizer"] = {"claims": claims}
    return event


def post_event(prefix: str, token: str, data: bytes) -> dict:
    return api_event("POST", prefix + "/images", prefix + "/images",
                     {"authorization": f"Bearer {token}", "content-type": "image/jpeg"}, body=data)


# ------------------------------------------------------------------ driver (a child)


def driver(root: str, api_url: str, aws_url: str, token: str, image: str, rounds: int,
           api_pid: int, aws_pid: int) -> dict:
    stack.enter_root(root)
    real_stdout = stack.quiet_stdout()
    import os

    import botocore.session
    import requests
    from botocore.config import Config

    os.environ["AWS_ENDPOINT_URL"] = aws_url
    import app

    settings = app.settings
    prefix = settings.route_prefix
    owner = app.auth.verify_token(token, settings.jwt_secret)
    data = Path(image).read_bytes()
    headers = {"Authorization": f"Bearer {token}"}
    post_headers = dict(headers, **{"Content-Type": "image/jpeg"})
    uc = app.use_cases()

    # A ready job: upload it, then run the worker's handler on its storage event.
    session = botocore.session.get_session()
    config = Config(connect_timeout=2, read_timeout=10, retries={"mode": "standard", "max_attempts": 3})
    sqs = session.create_client("sqs", region_name=settings.region, endpoint_url=aws_url, config=config)
    ddb = session.create_client("dynamodb", region_name=settings.region, endpoint_url=aws_url, config=config)
    s3 = session.create_client("s3", region_name=settings.region, endpoint_url=aws_url,
                               config=config.merge(Config(signature_version="s3v4",
                                                          s3={"addressing_style": "path"})))
    keep = requests.Session()
    answer = keep.post(f"{api_url}{prefix}/images", data=data, headers=post_headers, timeout=60)
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["job_id"]
    queue_url = sqs.get_queue_url(QueueName=settings.events_queue_name)["QueueUrl"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1).get("Messages", [])
        for message in messages:
            if job_id in message["Body"]:
                uc.worker.process_storage_message(message["Body"])
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                deadline = 0
    ready = keep.get(f"{api_url}{prefix}/image-jobs/{job_id}", headers=headers, timeout=30).json()
    assert ready["status"] == "ready", ready
    item = ddb.get_item(TableName=settings.table, Key={"pk": {"S": "job#" + job_id}},
                        ConsistentRead=True)["Item"]
    # Each rendition's key, from the record as the store writes it (dynamo_jobs.py: one
    # `renditions` map keyed by name since shape 3).
    keys = [r["M"]["key"]["S"] for r in item["renditions"]["M"].values()]

    def floor_get():
        ddb.get_item(TableName=settings.table, Key={"pk": {"S": "job#" + job_id}}, ConsistentRead=True)
        for key in keys:
            s3.generate_presigned_url("get_object", Params={"Bucket": settings.bucket, "Key": key},
                                      ExpiresIn=settings.url_ttl_seconds)

    def floor_post():
        # What accept_upload writes: the job and its owner's quota place in one transaction
        # (issue 9), then the original.
        new_id = str(uuid.uuid4())
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": settings.table, "Item": dict(item, pk={"S": "job#" + new_id}),
                     "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Update": {"TableName": settings.table, "Key": {"pk": {"S": "owner#floor"}},
                        "UpdateExpression": "ADD active :id SET expires_at = :ttl",
                        "ConditionExpression": "attribute_not_exists(active) OR size(active) < :quota",
                        "ExpressionAttributeValues": {":id": {"SS": [new_id]}, ":ttl": {"N": "4102444800"},
                                                      ":quota": {"N": "1000000"}}}},
        ])
        s3.put_object(Bucket=settings.bucket, Key=f"{settings.originals_prefix}{new_id}", Body=data,
                      ContentType="image/jpeg")

    def handler(event):
        def call():
            response = app.app(event, None)
            assert response["statusCode"] in (200, 202), response
        return call

    def fresh(method, url, **kwargs):
        def call():
            with requests.Session() as one:
                response = one.request(method, url, timeout=60, **kwargs)
            assert response.status_code in (200, 202), response.text
        return call

    def kept(method, url, **kwargs):
        def call():
            response = keep.request(method, url, timeout=60, **kwargs)
            assert response.status_code in (200, 202), response.text
        return call

    get_url, post_url = f"{api_url}{prefix}/image-jobs/{job_id}", f"{api_url}{prefix}/images"
    cases = {
        ("GET", "floor"): floor_get,
        ("GET", "use case"): lambda: uc.manage.urls(uc.manage.get_job(owner, job_id)),
        ("GET", "handler"): handler(get_event(prefix, job_id, token)),
        ("GET", "http keep"): kept("GET", get_url, headers=headers),
        ("GET", "http fresh"): fresh("GET", get_url, headers=headers),
        ("POST", "floor"): floor_post,
        ("POST", "use case"): lambda: uc.uploads.accept_upload(owner, data),
        ("POST", "handler"): handler(post_event(prefix, token, data)),
        ("POST", "http keep"): kept("POST", post_url, data=data, headers=post_headers),
        ("POST", "http fresh"): fresh("POST", post_url, data=data, headers=post_headers),
    }
    wall = {case: [] for case in cases}
    api_cpu = {case: 0.0 for case in cases}
    aws_cpu = {case: 0.0 for case in cases}
    for call in cases.values():  # warm every path once
        call()
    order = list(cases)
    for r in range(rounds):
        shift = r % len(order)  # rotate, so no case always follows the same one
        for case in order[shift:] + order[:shift]:
            api0, aws0 = stack.cpu_seconds(api_pid), stack.cpu_seconds(aws_pid)
            # Two calls back to back, the second timed: a client that keeps a connection
            # busy. After a pause longer than the retransmission timeout Linux ACKs at once
            # (quick-ACK), which would hide a delayed-ACK stall from a lone request.
            cases[case]()
            start = time.perf_counter()
            cases[case]()
            wall[case].append((time.perf_counter() - start) * 1000)
            api_cpu[case] += stack.cpu_seconds(api_pid) - api0
            aws_cpu[case] += stack.cpu_seconds(aws_pid) - aws0
    calls = 2 * rounds
    result = {
        "bytes": len(data),
        "cases": [{"method": m, "case": c, "wall_ms": wall[m, c],
                   "api_cpu_ms": api_cpu[m, c] * 1000 / calls,
                   "aws_cpu_ms": aws_cpu[m, c] * 1000 / calls} for (m, c) in cases],
        "job_id": job_id,
    }
    print(json.dumps(result), file=real_stdout)
    return result


# -------------------------------------------------------------- cold start (a child)


def cold_child(root: str, aws_url: str, token: str, job_id: str, owner: str) -> None:
    """Measured from the first line that runs after the interpreter started. With
    AUTH_MODE=cognito the event carries the claims, as API Gateway passes them to Lambda."""
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    stack.enter_root(root)
    real_stdout = stack.quiet_stdout()
    import os

    os.environ["AWS_ENDPOINT_URL"] = aws_url
    marks = []

    def mark(name):
        marks.append((name, (time.perf_counter() - start_wall) * 1000, (time.process_time() - start_cpu) * 1000))

    import app

    mark("import app")
    app.use_cases()
    mark("build")
    claims = ({"sub": owner, "token_use": "id", "aud": COGNITO_CLIENT}
              if app.settings.auth_mode == "cognito" else None)
    response = app.app(get_event(app.settings.route_prefix, job_id, token, claims), None)
    mark("first GET")
    assert response["statusCode"] == 200 and '"ready"' in response["body"], response
    loaded = [name for name in HEAVY if name in sys.modules]
    print(json.dumps({"marks": marks, "loaded": loaded}), file=real_stdout)


# ------------------------------------------------------------------- parent


def measure(root: Path, image: Path, rounds: int, cold: int) -> dict:
    with stack.Runner(root, "api", {"AUTH_MODE": "jwt", **UNLIMITED}) as runner:
        api_pid, aws_pid = runner.pid_of("chalice_local"), runner.pid_of("moto_server")
        token = mint(root)
        load_before = stack.load_average()
        result = stack.run_child(SCRIPT, root, [
            "driver", runner.api_url, runner.aws_url, token, str(image), str(rounds),
            str(api_pid), str(aws_pid)], {"LOCAL_RUNNER": "1", **UNLIMITED})  # LOCAL_RUNNER: for the public HS256 secret
        pythons = {"packaged": stack.packaged_python(root), "dev venv": sys.executable}
        colds = {(mode, where): [stack.run_child(
                     SCRIPT, root, ["cold", runner.aws_url, token, result["job_id"], "bench"],
                     {"AUTH_MODE": mode, "COGNITO_USER_POOL_ARN": COGNITO_POOL,
                      "COGNITO_APP_CLIENT_IDS": COGNITO_CLIENT,
                      "LOCAL_RUNNER": "1" if mode == "jwt" else ""}, python=python)
                     for _ in range(cold)]
                 for mode in COLD_MODES for where, python in pythons.items()}
        python_start = interpreter_start(root)
        result.update(colds=colds, python_start_ms=python_start,
                      load=f"{load_before} -> {stack.load_average()}")
    return result


def mint(root: Path) -> str:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "local.token", "bench", "--ttl", "3600"], cwd=root,
                          env={**stack.AWS_ENV, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def interpreter_start(root: Path, runs: int = 5) -> float:
    """Wall ms of `python -c pass` in the same venv: what every cold start pays before ours."""
    import subprocess

    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], cwd=root, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return stack.median(times)


def make_image(path: Path, width: int = 4000, height: int = 3000) -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    from load import photo_like

    path.write_bytes(photo_like(width, height, seed=11, quality=92))


def report(label: str, result: dict, megapixels: float = 12) -> list[str]:
    missed = []
    print(f"\n## {label}   (load average {result['load']})")
    print(f"POST body: {result['bytes'] / 1e6:.2f} MB JPEG, {megapixels:.2g} MP; GET: a ready job. "
          "Wall ms per request; CPU ms per request of the API process and of the emulator.")
    head = f"{'request':<7} {'case':<11} {'median':>7} {'p90':>7} {'x floor':>8} {'API cpu':>8} {'emu cpu':>8}"
    print(head)
    print("-" * len(head))
    rows = {(c["method"], c["case"]): c for c in result["cases"]}
    for method in ("POST", "GET"):
        floor = stack.median(rows[method, "floor"]["wall_ms"])
        for case in GET_CASES:
            row = rows[method, case]
            med = stack.median(row["wall_ms"])
            print(f"{method:<7} {case:<11} {med:>7.1f} {stack.percentile(row['wall_ms'], 90):>7.1f}"
                  f" {med / floor:>7.2f}x {row['api_cpu_ms']:>8.1f} {row['aws_cpu_ms']:>8.1f}")
            if case == "http keep" and med > 1.5 * floor:
                missed.append(f"{label}: {method} keep-alive {med:.1f} ms = {med / floor:.2f}x the floor (> 1.5x)")
    for (mode, where), colds in result["colds"].items():
        if not colds:
            continue
        print(f"\ncold start {mode} ({COLD_MODES[mode]}), {ENVIRONMENTS[where]}, {len(colds)} fresh "
              f"processes, median; python -c pass itself: {result['python_start_ms']:.0f} ms wall, not included")
        names = [name for name, *_ in colds[0]["marks"]]
        head = f"{'step':<12} {'wall ms':>8} {'cpu ms':>8}   (cumulative)"
        print(head)
        print("-" * len(head))
        for i, name in enumerate(names):
            wall = stack.median([c["marks"][i][1] for c in colds])
            cpu = stack.median([c["marks"][i][2] for c in colds])
            print(f"{name:<12} {wall:>8.0f} {cpu:>8.0f}")
        total = stack.median([c["marks"][-1][1] for c in colds])
        print("imported by then: " + (", ".join(colds[0]["loaded"]) or "none of " + ", ".join(HEAVY)))
        if total > 250 and where == "packaged":
            missed.append(f"{label}: cold start ({mode}) {total:.0f} ms (> 250 ms)")
    return missed


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        root, kind, *rest = sys.argv[2:]
        if kind == "driver":
            api_url, aws_url, token, image, rounds, api_pid, aws_pid = rest
            driver(root, api_url, aws_url, token, image, int(rounds), int(api_pid), int(aws_pid))
        else:
            cold_child(root, *rest)
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds of every case")
    parser.add_argument("--cold", type=int, default=5, help="fresh processes for the cold start")
    parser.add_argument("--size", default="4000x3000",
                        help="WxH of the photo-like JPEG that POST sends (default 4000x3000: 12 MP)")
    parser.add_argument("--root", action="append", type=Path,
                        help="a checkout to measure (repeat to compare); default: this one")
    args = parser.parse_args()
    roots = [r.resolve() for r in (args.root or [stack.THIS_ROOT])]
    missed = []
    with tempfile.TemporaryDirectory(prefix="api-bench-") as tmp:
        image = Path(tmp) / "photo.jpg"
        width, height = (int(side) for side in args.size.split("x"))
        make_image(image, width, height)
        results = [(root, measure(root, image, args.rounds, args.cold)) for root in roots]
    print(f"{args.rounds} interleaved rounds; 2 cores shared with whatever else runs.")
    for root, result in results:
        missed += report(f"{root} @ {stack.label_of(root)}", result, width * height / 1e6)
    print()
    for line in missed:
        print("TARGET MISSED: " + line)
    if not missed:
        print("targets met: keep-alive POST and GET <= 1.5x the floor, cold start <= 250 ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
