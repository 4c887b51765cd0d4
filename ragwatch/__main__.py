import sys

from ragwatch.cli import main

sys.exit(main())
