"""Test support shared by unit and integration tests (fakes driven by hand)."""
