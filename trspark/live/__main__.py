import sys

from trspark.live.engine_process import main

sys.exit(main())
