"""The shell server (``shell_server.py``) that dies mid-call (``os._exit``) on any command
containing ``gh``: a server process that crashes while a call is in flight."""

import sys

from shell_server import main

if __name__ == "__main__":
    sys.argv[1:] = ["--crash-on", "gh"]
    main()
