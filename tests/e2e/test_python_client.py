"""End-to-end: the Python client (python/nsbox) against real sandboxes.

The tests live with the package, in python/tests/ (test_client.py and
test_client_hooks_files.py: real sandboxes through NSBOX_BIN; test_protocol.py: the wire
protocol against a fake supervisor), so that they run from a copy of python/ too; this wrapper
lets ctest run them through tests/run_py_test.py."""
import importlib.util
import os
import sys
import unittest

_SOURCE = os.environ.get("NSBOX_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

for _file in ("test_client.py", "test_client_hooks_files.py", "test_protocol.py"):
    _name = "nsbox_python_" + _file[:-3]
    _spec = importlib.util.spec_from_file_location(
        _name, os.path.join(_SOURCE, "python", "tests", _file))
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_name] = _module  # unittest finds setUpModule through the classes' module
    _spec.loader.exec_module(_module)
    for _attr, _obj in vars(_module).items():
        if isinstance(_obj, type) and issubclass(_obj, unittest.TestCase):
            globals()[_attr] = _obj
    del _attr, _obj  # or the loader would find the last class twice
