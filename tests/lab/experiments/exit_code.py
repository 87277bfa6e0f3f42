"""Exits with argv[1] without touching Ray: the fastest possible driver."""

import sys

sys.exit(int(sys.argv[1]))
