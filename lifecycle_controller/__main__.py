"""Allows ``python -m lifecycle_controller``."""

from lifecycle_controller.cli import main

main()
