# SPDX-License-Identifier: Apache-2.0
"""The PEP 517 build backend of pyproject.toml: setuptools.build_meta, made to work offline.

pyproject.toml requires nothing (requires = []), so pip's build isolation has nothing to
download. Isolation also hides the interpreter's site-packages, where setuptools and wheel are
(Debian: python3-setuptools, python3-wheel); this module adds those folders back, after
everything else on sys.path, when setuptools cannot be imported otherwise, and asks for no extra
build requirements (setuptools would ask pip for `wheel`, which pip would try to download).

Wheels, sdists and their metadata are built from a copy of this folder in a temporary directory,
so a build leaves no build/ or *.egg-info behind in the source tree. An editable install
(pip install -e) is built in place, since it must point at these files.
"""

import contextlib
import os
import shutil
import site
import sys
import tempfile


def _import_build_meta():
    try:
        import setuptools.build_meta as build_meta
    except ImportError:
        known = set(sys.path)
        for folder in site.getsitepackages() + [site.getusersitepackages()]:
            if folder not in known and os.path.isdir(folder):
                sys.path.append(folder)
        try:
            import setuptools.build_meta as build_meta
        except ImportError as error:
            raise ImportError(
                "building the infiniop package needs setuptools (>= 61) and wheel in the Python "
                f"that runs pip ({sys.executable}); on Debian: apt-get install "
                "python3-setuptools python3-wheel") from error
    return build_meta


_build_meta = _import_build_meta()


@contextlib.contextmanager
def _in_copy():
    """Runs the body in a temporary copy of this folder (the package's sources only)."""
    source = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="infiniop-build-") as work:
        copy = os.path.join(work, "src")
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(
            "build", "dist", "*.egg-info", "__pycache__", "*.pyc"))
        os.chdir(copy)
        try:
            yield
        finally:
            os.chdir(source)


def _absolute(directory):
    return os.path.abspath(directory)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    metadata_directory = _absolute(metadata_directory)
    with _in_copy():
        return _build_meta.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel_directory = _absolute(wheel_directory)
    with _in_copy():
        return _build_meta.build_wheel(wheel_directory, config_settings)


def build_sdist(sdist_directory, config_settings=None):
    sdist_directory = _absolute(sdist_directory)
    with _in_copy():
        return _build_meta.build_sdist(sdist_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _build_meta.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _build_meta.build_editable(wheel_directory, config_settings, metadata_directory)
