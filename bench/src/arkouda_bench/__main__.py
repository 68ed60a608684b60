"""`python -m arkouda_bench`: the bench command line."""

import sys

from arkouda_bench.cli import main

sys.exit(main())
