"""Run one unittest module for ctest.

Exit 0 when every test passed, 1 when any failed, 77 (ctest's skip code) when the whole module
could not run here. A module with some tests skipped and others passed still exits 0, but the
skips are printed with their reasons so that they are never silently counted as passes."""
import os
import sys
import unittest

path = sys.argv[1]
sys.path.insert(0, os.path.dirname(path))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
mod_name = os.path.splitext(os.path.basename(path))[0]
module = __import__(mod_name)
suite = unittest.defaultTestLoader.loadTestsFromModule(module)
result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
for test, reason in result.skipped:
    print(f"SKIPPED {test.id()}: {reason}")
ran = result.testsRun - len(result.skipped)  # a module-level skip counts as a skip without a run
print(f"{ran} passed-or-failed, {len(result.failures) + len(result.errors)} failed, "
      f"{len(result.skipped)} skipped")
if not result.wasSuccessful():
    sys.exit(1)
sys.exit(77 if ran <= 0 else 0)
