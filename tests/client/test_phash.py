"""The SDK's Hamming distance of two `phash` values, the same count as the server's."""
from image_jobs import PHASH_NEAR, Job, phash_distance

from chalicelib.imaging.phash import distance


def test_phash_distance_counts_the_bits_that_differ_as_the_server_does():
    pairs = [("0000000000000000", "ffffffffffffffff"), ("bb8320376c0f3637", "bb8320376c0f3637"),
             ("0000000000000001", "8000000000000000"), ("c2924c5532bddfc8", "bb8320376c0f3637")]
    for a, b in pairs:
        assert phash_distance(a, b) == distance(a, b)
    assert phash_distance(*pairs[0]) == 64 and PHASH_NEAR == 8
    assert Job.phash.__doc__ and Job.source.__doc__
