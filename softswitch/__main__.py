"""``python -m softswitch``: the ``softswitch-grpc`` command."""

import sys

from .cli import main

sys.exit(main())
