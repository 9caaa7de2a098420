"""Chapter 7's decoding cost, whose home is :mod:`attnbook.experiments.ch07` (settings, timing, the stored results).

    python bench/transformer_decoding.py --write    # the same as python -m attnbook.experiments.ch07 decoding --write

See ``python -m attnbook.experiments.ch07 decoding --help``.
"""

import sys

from attnbook.experiments import ch07

if __name__ == "__main__":
    sys.exit(ch07.main(["decoding", *sys.argv[1:]]))
