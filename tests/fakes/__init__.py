"""Test doubles that speak real protocols over 127.0.0.1 (no mocks inside the code under test)."""
