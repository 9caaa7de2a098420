"""Chapter 7's ablations, whose home is :mod:`attnbook.experiments.ch07` (settings, data, training, the stored results).

    python bench/transformer_ablations.py --write   # the same as python -m attnbook.experiments.ch07 ablations --write
    python bench/transformer_ablations.py --shard 0/3 --partial /tmp/ablations   # and 1/3, 2/3; then --merge --write

See ``python -m attnbook.experiments.ch07 ablations --help``.
"""

import sys

from attnbook.experiments import ch07

if __name__ == "__main__":
    sys.exit(ch07.main(["ablations", *sys.argv[1:]]))
