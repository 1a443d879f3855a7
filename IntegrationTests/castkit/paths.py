"""Where things live in the checkout, for every Python module of the project.

The import roots themselves (IntegrationTests/ for castkit with castkit.bench and
castkit.faults, Scripts/stack/ for the gateway) are put on sys.path by the venv: Scripts/bootstrap
writes castd-paths.pth into .venv's site-packages (docs/testing.md, "Python layout"). This module
names the files and directories the code runs or reads.
"""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IT = REPO / "IntegrationTests"            # the pytest tests (conftest.py: fixtures only)
CASTKIT = IT / "castkit"                  # this package: peers, receivers, rigs, helpers
SCRIPTS = REPO / "Scripts"                # the command-line entry points
STACK = SCRIPTS / "stack"                 # the local stack: gateway package, migrations, pages
DEVSTACK = SCRIPTS / "devstack"           # its command (up, down, status, restart)
PYTHON = str(REPO / ".venv" / "bin" / "python")   # the pinned environment's interpreter
