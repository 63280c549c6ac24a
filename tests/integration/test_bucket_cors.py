"""The bucket's CORS rules come from infra/template.yaml, and the embedded S3 enforces them as
S3 does (local/moto_server.py), so a page that works locally works against the cloud's bucket."""
import requests

from local.provision import bucket_cors_rules, load_template

PAGE = "http://127.0.0.1:8080"


def template_rules():
    template = load_template()
    (bucket,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
    return bucket_cors_rules(bucket, template)


def test_the_embedded_bucket_has_the_templates_cors_rules(stack):
    settings, _, clients = stack
    (rule,) = clients["s3"].get_bucket_cors(Bucket=settings.bucket)["CORSRules"]
    (expected,) = template_rules()
    assert {k: rule[k] for k in expected} == expected
    assert {"POST", "PUT", "GET"} <= set(rule["AllowedMethods"])  # upload form, PUT and parts, renditions
    assert rule["ExposeHeaders"] == ["ETag"]


def test_a_browser_may_post_the_presigned_form_and_read_the_object(stack):
    settings, _, clients = stack
    s3 = clients["s3"]
    preflight = requests.options(f"{settings.endpoint_url}/{settings.bucket}", timeout=10, headers={
        "Origin": PAGE, "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 200
    assert preflight.headers["Access-Control-Allow-Origin"] == PAGE

    form = s3.generate_presigned_post(settings.bucket, "originals/cors-check")
    posted = requests.post(form["url"], data=form["fields"], files={"file": ("x", b"pixels")},
                           headers={"Origin": PAGE}, timeout=10)
    assert posted.status_code == 204
    assert posted.headers["Access-Control-Allow-Origin"] == PAGE  # else the page cannot see it worked

    url = s3.generate_presigned_url("get_object", Params={"Bucket": settings.bucket, "Key": "originals/cors-check"})
    read = requests.get(url, headers={"Origin": PAGE}, timeout=10)
    assert read.content == b"pixels" and read.headers["Access-Control-Allow-Origin"] == PAGE


def test_an_origin_the_rules_do_not_name_is_refused(stack):
    """moto's server allows every origin unless told not to; the runner's does not."""
    settings, _, clients = stack
    clients["s3"].put_bucket_cors(Bucket=settings.bucket, CORSConfiguration={"CORSRules": [
        {"AllowedMethods": ["POST", "GET"], "AllowedOrigins": ["https://photos.example.com"]}]})
    preflight = requests.options(f"{settings.endpoint_url}/{settings.bucket}", timeout=10, headers={
        "Origin": PAGE, "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 403
    assert "Access-Control-Allow-Origin" not in preflight.headers
    url = clients["s3"].generate_presigned_url("get_object", Params={"Bucket": settings.bucket, "Key": "none"})
    assert "Access-Control-Allow-Origin" not in requests.get(url, headers={"Origin": PAGE}, timeout=10).headers


def test_a_browser_may_put_a_part_and_read_its_etag(stack):
    """The page PUTs parts to presigned URLs and reads each answer's ETag for the completion:
    the preflight allows PUT with a Content-Type, and the answer exposes ETag."""
    settings, _, clients = stack
    s3 = clients["s3"]
    key = "originals/cors-parts"
    preflight = requests.options(f"{settings.endpoint_url}/{settings.bucket}/{key}", timeout=10, headers={
        "Origin": PAGE, "Access-Control-Request-Method": "PUT",
        "Access-Control-Request-Headers": "content-type"})
    assert preflight.status_code == 200 and "PUT" in preflight.headers["Access-Control-Allow-Methods"]
    upload_id = s3.create_multipart_upload(Bucket=settings.bucket, Key=key)["UploadId"]
    url = s3.generate_presigned_url("upload_part", Params={
        "Bucket": settings.bucket, "Key": key, "UploadId": upload_id, "PartNumber": 1})
    put = requests.put(url, data=b"part one", headers={"Origin": PAGE}, timeout=10)
    assert put.status_code == 200 and put.headers["Access-Control-Allow-Origin"] == PAGE
    assert "ETag" in put.headers["Access-Control-Expose-Headers"] and put.headers["ETag"]
    s3.abort_multipart_upload(Bucket=settings.bucket, Key=key, UploadId=upload_id)
