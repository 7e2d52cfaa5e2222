"""``python -m dpacct.cli`` runs the command line."""

import sys

from dpacct.cli import main

sys.exit(main())
