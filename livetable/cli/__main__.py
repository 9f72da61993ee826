"""``python -m livetable.cli``: the ``livetable`` command without its installed script
(the tests and the benchmarks start servers this way when the script is not on the path).
Guarded, so that importing every module (as tests/unit/test_one_way.py does) runs nothing."""

import sys

from livetable.cli import main

if __name__ == "__main__":
    sys.exit(main())
