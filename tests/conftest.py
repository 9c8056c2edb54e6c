"""Shared pytest configuration for every test layer."""
