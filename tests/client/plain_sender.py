"""A plain HTTP client, as a phone's background uploader is one: it sends the requests a
PreparedUpload saved (docs/api-guide.md), with urllib and nothing of the SDK.

    python plain_sender.py requests.json photo.jpg

For each request it reads a line from stdin (the test's go-ahead: EOF ends it), prints
`sending N`, sends `length` bytes of the file from `offset` with exactly the request's
headers, and prints `stored N <status>` once storage has answered."""
import json
import sys
import urllib.request


def main(saved_path: str, file_path: str) -> None:
    with open(saved_path) as saved:
        requests = json.load(saved)["requests"]
    for index, request in enumerate(requests, start=1):
        if not sys.stdin.readline():
            return
        number = request.get("partNumber") or index
        with open(file_path, "rb") as file:
            file.seek(request["offset"])
            body = file.read(request["length"])
        print(f"sending {number}", flush=True)
        sent = urllib.request.Request(request["url"], data=body, method=request["method"],
                                      headers=request["headers"])
        with urllib.request.urlopen(sent, timeout=120) as answer:
            print(f"stored {number} {answer.status}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
