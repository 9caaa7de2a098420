"""Chapter 6's benchmark, whose home is :mod:`attnbook.experiments.ch06` (settings, measuring, the stored results).

    python bench/attention_cost.py --write      # the same as python -m attnbook.experiments.ch06 --write
    python bench/attention_cost.py --quick      # a trial run into a temporary folder

See ``python -m attnbook.experiments.ch06 --help``.
"""

import sys

from attnbook.experiments import ch06

if __name__ == "__main__":
    sys.exit(ch06.main())
