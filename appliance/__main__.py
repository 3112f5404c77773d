"""``python -m appliance`` is ``steeple``."""

import sys

from appliance.cli import main

sys.exit(main())
