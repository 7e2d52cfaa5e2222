"""Root test configuration: skip collecting the optional torch adapter's doctests without its extras."""

from __future__ import annotations

import importlib.util

collect_ignore_glob: list[str] = []
if importlib.util.find_spec("torch") is None:
    collect_ignore_glob.append("dpacct/torch/*")
elif importlib.util.find_spec("opacus") is None:
    collect_ignore_glob.append("dpacct/torch/opacus_accountants.py")
