"""Allows ``python -m lifecycle_controller``."""

from lifecycle_controller.entry import main

main()
