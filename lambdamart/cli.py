"""The ``lambdamart`` command line."""

import argparse
import sys


def build_parser():
    parser = argparse.ArgumentParser(prog="lambdamart", description="Gradient-boosted LambdaMART ranking.")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
