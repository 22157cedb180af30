"""The shell server, now :mod:`unstuck.integrations.shell_server` (run by path here so that
``crashing_server.py`` and ``hanging_server.py`` can import its ``main``)."""

from unstuck.integrations.shell_server import main

if __name__ == "__main__":
    main()
