"""Shared plumbing; nothing here is public API."""
