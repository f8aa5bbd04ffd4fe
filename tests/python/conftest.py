# SPDX-License-Identifier: Apache-2.0
"""Makes `import infiniop` work from a source checkout: the package lives in <repo>/python.

The library itself is found by the package ($INFINIOP_LIBRARY, else <repo>/build*/).
"""

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO_ROOT / "python"

if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


def pytest_report_header(config):
    import infiniop

    try:
        lib = infiniop.get_library()
    except infiniop.LibraryNotFoundError as error:
        return f"infiniop: library not loaded: {error}"
    header = f"infiniop: {lib.infiniop_path} (cpu ISA {infiniop.cpu_isa_name()})"
    import helpers  # the opencl probe the device lists were made with

    if helpers.OPENCL_AVAILABLE:
        return header + "; opencl: available"
    return header + f"; opencl: {helpers.OPENCL_SKIP_REASON or 'not built'}"


def pytest_sessionfinish(session, exitstatus):
    # The session-wide opencl handle of helpers (if a test module imported it): close it while
    # the library and the OpenCL runtime are still loaded, not in a finalizer at exit.
    helpers = sys.modules.get("helpers")
    if helpers is not None and hasattr(helpers, "close_shared_handles"):
        helpers.close_shared_handles()
