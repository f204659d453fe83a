"""What the Python package's tests share: the package on sys.path, and the
libwarmlake.so it loads. Under WL_SANITIZED=1 the build's library carries
ASan, which cannot be loaded into an uninstrumented python: the release
build's library is used against the sanitized server instead, and the tests
skip when there is none."""
import os
import sys

import pytest

from conftest import BUILD, ROOT

sys.path.insert(0, os.path.join(ROOT, "client", "python"))

LIB = os.path.join(BUILD, "client", "libwarmlake.so")
if os.environ.get("WL_SANITIZED") == "1":
    LIB = os.path.join(ROOT, "build", "client", "libwarmlake.so")


def need_lib():
    if not os.path.exists(LIB):
        pytest.skip("no uninstrumented libwarmlake.so at %s" % LIB)
    os.environ["WARMLAKE_LIB"] = LIB
