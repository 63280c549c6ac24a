"""`python -m local.moto_server`: moto's server, answering browsers as S3 does.

By default moto's server answers every cross-origin request with "allow all" (flask-cors),
so a bucket without CORS would work here and fail in the cloud. The runner turns that off
(MOTO_DISABLE_GLOBAL_CORS=true, set before moto is imported) so the bucket's own CORS rules
from infra/template.yaml decide, as in S3. moto 5.2 then honours them on preflights and on
reads, but leaves them off the answer to a browser's form upload (presigned POST); this
adds them there, as S3 does. (moto matches a rule on the origin only, not the method; the
template's methods are checked by tests instead.)
"""
import os
import sys

os.environ["MOTO_DISABLE_GLOBAL_CORS"] = "true"

from moto.s3.responses import S3Response  # noqa: E402
from moto.server import main  # noqa: E402

_bucket_response_post = S3Response._bucket_response_post


def _bucket_response_post_with_cors(self, request, bucket_name):
    status, headers, body = _bucket_response_post(self, request, bucket_name)
    return status, {**self._get_cors_headers_other(), **headers}, body


S3Response._bucket_response_post = _bucket_response_post_with_cors

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
