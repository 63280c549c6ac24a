"""ObjectStore on S3-compatible storage (AWS, LocalStack, MinIO, moto) through boto3."""
from __future__ import annotations

from datetime import datetime
from typing import Iterator, Optional

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.domain.errors import FileTooLarge, InvalidRequest, TransientError
from chalicelib.domain.storage import PresignedPost, PresignedPut, StoredObject, StoredPart

_MISSING = ("NoSuchKey", "404", "NotFound")
# A multipart upload that was completed or aborted (or never was).
_NO_UPLOAD = ("NoSuchUpload",)
# ListParts of such an upload: Ceph's RADOS Gateway answers NoSuchKey where S3 says NoSuchUpload.
_NO_PARTS = _NO_UPLOAD + ("NoSuchKey",)
# A completion whose parts are not what storage holds: the client's to fix.
_BAD_PARTS = ("InvalidPart", "InvalidPartOrder", "EntityTooSmall", "MalformedXML")


def _code(error: ClientError) -> str:
    return error.response.get("Error", {}).get("Code", "")


class S3Store:
    def __init__(self, client, bucket: str, presign_client=None, get_presigner=None):
        self._client = client
        self._bucket = bucket
        # Presigned URLs must name an endpoint the client can reach, which may differ.
        self._presign_client = presign_client or client
        # GET URLs signed without making the S3 client (chalicelib/adapters/s3_presign.py).
        self._get_presigner = get_presigner

    def put(self, key: str, data: bytes, content_type: str, cache_control: Optional[str] = None) -> None:
        extra = {} if cache_control is None else {"CacheControl": cache_control}
        try:
            self._client.put_object(Bucket=self._bucket, Key=key, Body=data, ContentType=content_type, **extra)
        except (BotoCoreError, ClientError) as error:
            raise TransientError("storage unavailable") from error

    def copy(self, source_key: str, key: str) -> None:
        # CopyObject keeps the source's metadata (Content-Type, Cache-Control) by default.
        try:
            self._client.copy_object(Bucket=self._bucket, Key=key,
                                     CopySource={"Bucket": self._bucket, "Key": source_key})
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in _MISSING:
                raise KeyError(source_key) from None
            raise TransientError("storage unavailable") from error
        except BotoCoreError as error:
            raise TransientError("storage unavailable") from error

    def head(self, key: str) -> Optional[StoredObject]:
        # A missing key reads as 404 only with s3:ListBucket on the bucket; without it S3
        # answers 403, which must stay an outage here, never "missing" (infra/stage_config.py).
        try:
            response = self._client.head_object(Bucket=self._bucket, Key=key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in _MISSING:
                return None
            raise TransientError("storage unavailable") from error
        except BotoCoreError as error:
            raise TransientError("storage unavailable") from error
        return StoredObject(size=response["ContentLength"], last_modified=response["LastModified"],
                            cache_control=response.get("CacheControl"))

    def get(self, key: str, max_bytes: int) -> bytes:
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=key)
            if response["ContentLength"] > max_bytes:
                response["Body"].close()
                raise FileTooLarge(f"The file is larger than {max_bytes} bytes")
            return response["Body"].read()
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in _MISSING:
                raise KeyError(key) from None
            raise TransientError("storage unavailable") from error
        except BotoCoreError as error:
            raise TransientError("storage unavailable") from error

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self._bucket, Key=key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in _MISSING:
                return
            raise TransientError("storage unavailable") from error
        except BotoCoreError as error:
            raise TransientError("storage unavailable") from error

    def delete_many(self, keys: list[str]) -> None:
        # DeleteObjects: up to 1,000 keys a call, each authorized as s3:DeleteObject; a
        # missing key counts as deleted. Quiet: the answer lists only the failures.
        for start in range(0, len(keys), 1000):
            chunk = keys[start:start + 1000]
            try:
                answer = self._client.delete_objects(Bucket=self._bucket, Delete={
                    "Objects": [{"Key": key} for key in chunk], "Quiet": True})
            except (BotoCoreError, ClientError) as error:
                raise TransientError("storage unavailable") from error
            failed = [e for e in answer.get("Errors", []) if e.get("Code") not in _MISSING]
            if failed:
                raise TransientError(f"storage refused {len(failed)} deletes, {failed[0].get('Code')} first")

    def presign_get(self, key: str, expires_in: int, signed_at: Optional[datetime] = None) -> str:
        if self._get_presigner is not None:
            return self._get_presigner.url(self._bucket, key, expires_in, signed_at)
        if signed_at is not None:
            raise ValueError("a signing time needs the GetPresigner (chalicelib/adapters/s3_presign.py)")
        return self._presign_client.generate_presigned_url(
            "get_object", Params={"Bucket": self._bucket, "Key": key}, ExpiresIn=expires_in
        )

    def presign_post(self, key: str, content_type: str, max_size: int, expires_in: int,
                     cache_control: Optional[str] = None) -> PresignedPost:
        fields = {"Content-Type": content_type}
        if cache_control is not None:
            fields["Cache-Control"] = cache_control
        post = self._presign_client.generate_presigned_post(
            Bucket=self._bucket, Key=key, Fields=fields,
            # The policy pins the key, the type (and cache control) and the size; S3 refuses
            # anything else.
            Conditions=[*({k: v} for k, v in fields.items()), ["content-length-range", 1, max_size]],
            ExpiresIn=expires_in,
        )
        return PresignedPost(url=post["url"], fields=post["fields"])

    def presign_put(self, key: str, content_type: str, size: int, sha256: Optional[str],
                    expires_in: int, cache_control: Optional[str] = None) -> PresignedPut:
        # Each of these becomes a signed header: S3 refuses a PUT whose headers differ, and
        # one whose body is not Content-Length bytes or does not hash to the checksum.
        params = {"Bucket": self._bucket, "Key": key, "ContentType": content_type, "ContentLength": size}
        headers = {"Content-Type": content_type, "Content-Length": str(size)}
        if cache_control is not None:
            params["CacheControl"] = cache_control
            headers["Cache-Control"] = cache_control
        if sha256 is not None:
            params["ChecksumSHA256"] = sha256
            headers["x-amz-checksum-sha256"] = sha256
        url = self._presign_client.generate_presigned_url("put_object", Params=params, ExpiresIn=expires_in)
        return PresignedPut(url=url, headers=headers)

    def start_multipart(self, key: str, content_type: str, cache_control: Optional[str] = None) -> str:
        extra = {} if cache_control is None else {"CacheControl": cache_control}
        try:
            answer = self._client.create_multipart_upload(Bucket=self._bucket, Key=key,
                                                          ContentType=content_type, **extra)
        except (BotoCoreError, ClientError) as error:
            raise TransientError("storage unavailable") from error
        return answer["UploadId"]

    def presign_part(self, key: str, upload_id: str, number: int, size: int, expires_in: int) -> str:
        # Content-Length becomes a signed header, as for presign_put: S3 refuses a part of
        # another length, so no part larger than planned is ever stored.
        return self._presign_client.generate_presigned_url("upload_part", Params={
            "Bucket": self._bucket, "Key": key, "UploadId": upload_id, "PartNumber": number,
            "ContentLength": size,
        }, ExpiresIn=expires_in)

    def list_parts(self, key: str, upload_id: str) -> list[StoredPart]:
        parts: list[StoredPart] = []
        try:
            pages = self._client.get_paginator("list_parts").paginate(
                Bucket=self._bucket, Key=key, UploadId=upload_id)
            for page in pages:
                parts.extend(StoredPart(number=p["PartNumber"], etag=p["ETag"], size=p["Size"])
                             for p in page.get("Parts", []))
        except ClientError as error:
            if _code(error) in _NO_PARTS:
                raise KeyError(upload_id) from None
            raise TransientError("storage unavailable") from error
        except BotoCoreError as error:
            raise TransientError("storage unavailable") from error
        return sorted(parts, key=lambda p: p.number)

    def complete_multipart(self, key: str, upload_id: str, parts: list[StoredPart]) -> None:
        try:
            self._client.complete_multipart_upload(
                Bucket=self._bucket, Key=key, UploadId=upload_id,
                MultipartUpload={"Parts": [{"PartNumber": p.number, "ETag": p.etag} for p in parts]})
        except ClientError as error:
            if _code(error) in _NO_UPLOAD:
                raise KeyError(upload_id) from None
            if _code(error) in _BAD_PARTS:
                raise InvalidRequest("The parts are not the ones storage holds: "
                                     "GET the upload to see which it has") from None
            raise TransientError("storage unavailable") from error
        except BotoCoreError as error:
            raise TransientError("storage unavailable") from error

    def abort_multipart(self, key: str, upload_id: str) -> None:
        try:
            self._client.abort_multipart_upload(Bucket=self._bucket, Key=key, UploadId=upload_id)
        except ClientError as error:
            if _code(error) in _NO_UPLOAD:
                return
            raise TransientError("storage unavailable") from error
        except BotoCoreError as error:
            raise TransientError("storage unavailable") from error

    def list_keys(self, prefix: str, older_than: datetime, after: Optional[str] = None) -> Iterator[str]:
        # StartAfter: S3 lists from the first key after it, in key order (the orphan scan
        # resumes there); the paginator's later pages go on by continuation token.
        start = {} if after is None else {"StartAfter": after}
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self._bucket, Prefix=prefix, **start)
            for page in pages:
                for obj in page.get("Contents", []):
                    if obj["LastModified"] < older_than:
                        yield obj["Key"]
        except (BotoCoreError, ClientError) as error:
            raise TransientError("storage unavailable") from error
