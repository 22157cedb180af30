"""The shell server (``shell_server.py``) that never answers a call whose command contains
``gh``: a server process that hangs while a call is in flight."""

import sys

from shell_server import main

if __name__ == "__main__":
    sys.argv[1:] = ["--hang-on", "gh"]
    main()
