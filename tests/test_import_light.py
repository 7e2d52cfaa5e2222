"""``import dpacct`` stays light: it never imports the optional extras."""

from __future__ import annotations

import subprocess
import sys


def test_import_dpacct_does_not_import_torch_opacus_or_matplotlib() -> None:
    """A fresh interpreter that imports dpacct (and its public modules) has no torch, opacus or matplotlib loaded."""
    code = (
        "import sys, dpacct, dpacct.api, dpacct.ablq, dpacct.schedules, dpacct.calibration\n"
        "heavy = sorted(m for m in ('torch', 'opacus', 'matplotlib') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
