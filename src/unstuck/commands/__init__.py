"""What a command line does and needs: the shell parse, the interactive-call catalogue and command
screen, credential-changing commands, programs installed off PATH, the non-interactive forms of
waiting calls. May import core.
"""
