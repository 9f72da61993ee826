"""``python -m livetable.cli``: the ``livetable`` command without its installed script
(the tests and the benchmarks start servers this way when the script is not on the path)."""

import sys

from livetable.cli import main

sys.exit(main())
