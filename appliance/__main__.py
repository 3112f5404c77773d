"""``python -m appliance`` is ``steeple``."""

import sys

from appliance.cli.main import main

sys.exit(main())
