import sys

from .server import main

main(sys.argv[1:])
