"""Exercises of chapter 4."""
