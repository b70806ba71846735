"""``python -m k2k ...``, and the entry file for ``spark-submit``:

    spark-submit --master spark://host:7077 "$(python -c 'import k2k.__main__ as m; print(m.__file__)')" \\
        start -f pipeline.yaml

Run as a file (spark-submit runs it so), Python puts this package's own directory first on
``sys.path``; it is taken off again, so that k2k's modules are only importable as ``k2k.*``.
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    if not __package__ and sys.path and Path(sys.path[0]).resolve() == Path(__file__).parent:
        del sys.path[0]
    from k2k.cli import main

    main(prog_name="k2k")
