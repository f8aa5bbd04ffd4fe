# SPDX-License-Identifier: Apache-2.0
"""The package version: pyproject.toml reads it from here ([[tool.dynamic-metadata]]). It follows
the library's (include/infiniop/version.h); tests/python/test_binding.py checks the two agree."""

__version__ = "0.2.0"
