"""One factor for every wall-clock limit in the Python tests: s scaled by
CRNET_TEST_TIME_SCALE, which the test command sets per pass (the C tests'
tests/time_scale.h)."""

import os


def seconds(s):
    f = float(os.environ.get("CRNET_TEST_TIME_SCALE") or 1)
    if not 1 <= f <= 100:
        raise SystemExit("CRNET_TEST_TIME_SCALE=%s: not a number from 1 to 100" % f)
    return s * f
