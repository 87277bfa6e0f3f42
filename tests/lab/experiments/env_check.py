"""Driver: report whether a variable reached the driver with the expected value, given only
the value's sha256 (the value itself never appears in argv, the manifest or a log).

    env_check.py NAME SHA256
"""

import hashlib
import json
import os
import sys

name, digest = sys.argv[1], sys.argv[2]
value = os.environ.get(name, "")
print(json.dumps({"driver": hashlib.sha256(value.encode()).hexdigest() == digest}))
