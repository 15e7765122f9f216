import sys

from cloudddp.launcher.cli import main

sys.exit(main())
