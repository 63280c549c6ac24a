"""Push's stream trigger: how Lambda retries a batch of the table's stream (app.py's
push_job_changes). Chalice's on_dynamodb_record sets the batch size and starting position
only, and Lambda's defaults retry a failed batch until its records age out (a day), holding
the shard's later changes back all that time. So after each deploy:

    python -m infra.stream_source dev              # `make deploy` runs it after chalice deploy
    python -m infra.stream_source dev --template out/sam.json   # a `chalice package` template

The first sets them on the deployed event source mapping (Lambda's UpdateEventSourceMapping;
`chalice deploy` leaves them alone on later deploys, and this sets them again anyway); the
second writes them into the packaged SAM template, for a CloudFormation deploy of it.

The handler never raises and ends within its time budget (chalicelib/usecases/push.py), so
a failed batch is a crash: retried twice, halved each time to set a bad record apart, and
never older than the record age below. Push is best-effort: a change dropped here is read by
GET (docs/contract.md "Push").
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUNCTION = "push_job_changes"

# The event source mapping's properties: the same names in Lambda's API and in SAM.
STREAM_SOURCE = {
    "MaximumRetryAttempts": 2,
    "BisectBatchOnFunctionError": True,
    # A change older than this is no news: clients re-read a quiet job by GET every 15 s.
    "MaximumRecordAgeInSeconds": 300,
}


def function_name(app_name: str, stage: str) -> str:
    """Chalice names a handler's function <app>-<stage>-<handler>."""
    return f"{app_name}-{stage}-{FUNCTION}"


def apply(lambda_client, function: str, stream_arn: str) -> list[str]:
    """Set STREAM_SOURCE on the function's mappings of the stream; their UUIDs. None is an
    error: the deploy did not make the trigger this configures."""
    mappings = lambda_client.list_event_source_mappings(EventSourceArn=stream_arn, FunctionName=function)
    uuids = [m["UUID"] for m in mappings.get("EventSourceMappings", [])]
    if not uuids:
        raise SystemExit(f"{function} has no event source mapping of {stream_arn}: deploy the stage first")
    for uuid in uuids:
        lambda_client.update_event_source_mapping(UUID=uuid, **STREAM_SOURCE)
    return uuids


def configure_template(sam: dict) -> dict:
    """The packaged SAM template with STREAM_SOURCE on push_job_changes' DynamoDB event."""
    events = [event for resource in sam["Resources"].values()
              if resource["Type"] == "AWS::Serverless::Function"
              and resource["Properties"]["Handler"] == f"app.{FUNCTION}"
              for event in resource["Properties"].get("Events", {}).values()
              if event["Type"] == "DynamoDB"]
    if len(events) != 1:
        raise SystemExit(f"the template has {len(events)} DynamoDB events of {FUNCTION}, not one")
    events[0]["Properties"].update(STREAM_SOURCE)
    return sam


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage")
    parser.add_argument("--template", type=Path, help="a packaged sam.json to configure instead")
    parser.add_argument("--project-dir", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.template:
        args.template.write_text(json.dumps(configure_template(json.loads(args.template.read_text())), indent=2))
        print(f"{args.template}: {FUNCTION}'s stream source retries as infra/stream_source.py says")
        return 0
    from chalicelib.config import Settings

    config = json.loads((args.project_dir / ".chalice" / "config.json").read_text())
    settings = Settings.from_environ(config["stages"][args.stage].get("environment_variables", {}))
    if not settings.push_stream_arn:
        print(f"stage {args.stage} has no push stream: nothing to configure")
        return 0
    import boto3

    region = settings.push_stream_arn.split(":")[3]
    uuids = apply(boto3.session.Session(region_name=region).client("lambda"),
                  function_name(config["app_name"], args.stage), settings.push_stream_arn)
    print(f"{FUNCTION}'s stream source ({', '.join(uuids)}): {STREAM_SOURCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
